import { AGENT_OPERATIONS } from "../agents/operations";
import { APPROVAL_OPERATIONS } from "../approvals/operations";
import { AUDIT_OPERATIONS } from "../audit/operations";
import { CHARGE_OPERATIONS } from "../charges/operations";
import { CHECKOUT_OPERATIONS } from "../checkout/operations";
import { CONSOLE_API_OPERATIONS } from "../console/operations";
import { PAGE_OPERATIONS } from "../console/ui/operations";
import { KYT_OPERATIONS } from "../kyt/operations";
import {
  BAD_IDEMPOTENCY_KEY,
  CRASHED,
  HTML,
  IDEMPOTENCY_CONFLICT,
  IDEMPOTENCY_KEY,
  NOT_UTF8,
  type Operation,
  RATE_LIMITED,
  type ResponseSpec,
  TOO_LARGE,
  UNAUTHENTICATED,
  WRONG_CREDENTIAL,
} from "../lib/api-operation";
import { MCP_OPERATIONS } from "../mcp/operations";
// The domains in the order their schemas appear under components.schemas.
import { MERCHANT_OPERATIONS } from "../merchants/operations";
import { PAYLINK_OPERATIONS } from "../paylinks/operations";
import { PAYOUT_OPERATIONS } from "../payouts/operations";
import { PROOF_OPERATIONS } from "../proofs/operations";
import { RECEIPT_OPERATIONS } from "../receipts/operations";
import { REFUND_OPERATIONS } from "../refunds/operations";
import { TREASURY_OPERATIONS } from "../treasury/operations";
import { WEBHOOK_OPERATIONS } from "../webhooks/operations";
import { FACILITATOR_OPERATIONS } from "../x402/facilitator-operations";
import { X402_OPERATIONS } from "../x402/operations";
import { AGENT_X402_OPERATIONS } from "../x402/outbound/operations";

/**
 * Every operation the app serves: each domain lists its own beside its routes
 * (`<domain>/operations.ts`); this gathers them, with this document's own two.
 * The contract test proves this list and the app's route table are the same
 * set, and that real responses match.
 */

const DOCUMENTATION: Operation[] = [
  {
    method: "get",
    path: "/openapi.json",
    operationId: "getOpenApiDocument",
    summary: "This OpenAPI 3.1 document",
    tag: "Documentation",
    auth: "public",
    responses: { 200: { description: "The document.", contentType: "application/json" } },
  },
  {
    method: "get",
    path: "/docs",
    operationId: "getApiReference",
    summary: "The API reference page",
    tag: "Documentation",
    auth: "public",
    description:
      "Its script, Scalar's standalone bundle, is a static asset of this deployment at /standalone.js: the page loads nothing from another origin.",
    responses: { 200: HTML("Scalar's reference, rendered from /openapi.json.") },
  },
];

/**
 * The credential responses and the shared failures, added to every operation by its kind. Where an
 * operation answers a shared status with its own response, that response also lists the shared codes.
 */
function withShared(op: Operation): Operation {
  const shared: Record<number, ResponseSpec> = { 429: RATE_LIMITED, 500: CRASHED };
  if (op.auth === "merchant" || op.auth === "agent" || op.auth === "console") {
    shared[401] = UNAUTHENTICATED;
    shared[403] = WRONG_CREDENTIAL;
  }
  if (op.method !== "get" && op.method !== "delete") shared[413] = TOO_LARGE;
  if (op.body) shared[415] = NOT_UTF8;
  if (op.method === "post" && op.auth !== "public" && op.auth !== "page") {
    op.headers = [...(op.headers ?? []), IDEMPOTENCY_KEY];
    shared[409] = IDEMPOTENCY_CONFLICT;
    shared[400] = BAD_IDEMPOTENCY_KEY;
  }
  const responses: Record<number, ResponseSpec> = { ...shared, ...op.responses };
  for (const [status, own] of Object.entries(op.responses)) {
    const codes = [...(own.errors ?? []), ...(shared[Number(status)]?.errors ?? [])];
    if (codes.length > 0) responses[Number(status)] = { ...own, errors: [...new Set(codes)] };
  }
  return { ...op, responses };
}

/** Every documented operation, with the shared responses added. */
export const OPERATIONS: readonly Operation[] = [
  ...MERCHANT_OPERATIONS,
  ...PAYOUT_OPERATIONS,
  ...KYT_OPERATIONS,
  ...CHARGE_OPERATIONS,
  ...REFUND_OPERATIONS,
  ...X402_OPERATIONS,
  ...FACILITATOR_OPERATIONS,
  ...CHECKOUT_OPERATIONS,
  ...PAYLINK_OPERATIONS,
  ...AGENT_OPERATIONS,
  ...AGENT_X402_OPERATIONS,
  ...APPROVAL_OPERATIONS,
  ...AUDIT_OPERATIONS,
  ...PROOF_OPERATIONS,
  ...RECEIPT_OPERATIONS,
  ...WEBHOOK_OPERATIONS,
  ...CONSOLE_API_OPERATIONS,
  ...MCP_OPERATIONS,
  ...DOCUMENTATION,
  ...PAGE_OPERATIONS,
  ...TREASURY_OPERATIONS,
].map(withShared);
