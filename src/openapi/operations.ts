import { z } from "zod";
import * as agents from "../agents/routes";
import { PolicySchema } from "../agents/policy";
import * as approvals from "../approvals/routes";
import * as audit from "../audit/routes";
import * as charges from "../charges/routes";
import * as checkout from "../checkout/routes";
import * as consoleAuth from "../console/auth-routes";
import * as kyt from "../kyt/routes";
import * as merchants from "../merchants/routes";
import * as paylinks from "../paylinks/routes";
import * as webhooks from "../webhooks/routes";
import * as x402 from "../x402/routes";
import * as r from "./schemas";
import { RollKeyBody } from "../keys/roll";

/**
 * Every operation the app serves, listed once by hand. Request schemas are the
 * very objects the routes validate with (imported from the route modules);
 * response schemas are in ./schemas.ts. The contract test proves this list and
 * the app's route table are the same set, and that real responses match.
 */

/** Request bodies by name in `components.schemas`; converted as zod input (what a client sends). */
export const requestSchemas = z.registry<{ id: string; description?: string }>();
const body = <T extends z.ZodType>(id: string, schema: T): T => {
  if (!requestSchemas.has(schema)) requestSchemas.add(schema, { id });
  return schema;
};
body("PolicyInput", PolicySchema);

/** What POST /mcp takes, for the reader: the MCP transport itself parses and checks the JSON-RPC. */
const JsonRpcMessage = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number().int()]).optional().describe("Absent for a notification."),
  method: z.string(),
  params: z.record(z.string(), z.unknown()).optional(),
});
const JsonRpcRequest = z.union([JsonRpcMessage, z.array(JsonRpcMessage).min(1)]);

export type Method = "get" | "post" | "put" | "patch" | "delete";
export type Auth = "merchant" | "agent" | "console" | "public" | "page";

export interface HeaderParam {
  name: string;
  description: string;
  required?: boolean;
}

export interface ResponseSpec {
  description: string;
  /** A registered response schema, or several (any of them); absent when the body is not JSON. */
  schema?: z.ZodType | z.ZodType[];
  /** Default `application/json`. */
  contentType?: string;
  headers?: Record<string, string>;
  /**
   * A cross-cutting answer (rate limit, body size, crash, an Idempotency-Key
   * conflict) that every operation of its kind may give: documented, but the
   * contract test does not require to see it on each operation.
   */
  generic?: boolean;
  /** Shared under this name in `components.responses`. */
  component?: string;
}

export type TagName = (typeof TAGS)[number]["name"];

export interface Operation {
  method: Method;
  /** As Hono writes it (`/charges/:chargeId`); the document uses `{chargeId}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: TagName;
  auth: Auth;
  params?: z.ZodObject;
  query?: z.ZodObject;
  headers?: HeaderParam[];
  /** A JSON body, registered in `requestSchemas`. */
  body?: z.ZodType;
  /** The body may be left out altogether (no body, no Content-Type: every field takes its default). */
  bodyOptional?: true;
  /** A form body (console pages), for the reader only: those handlers read fields one by one. */
  form?: Record<string, string>;
  responses: Record<number, ResponseSpec>;
}

/** Tags, and the group each belongs to: the interface's surface apart from what operations.md and the service add. */
export const TAGS = [
  {
    name: "Merchants",
    group: "Interface",
    description: "Merchant registration, the merchant's own record and payout address (interface.md §4).",
  },
  {
    name: "Charges",
    group: "Interface",
    description: "Charges and paying them from an agent wallet (interface.md §4).",
  },
  {
    name: "x402",
    group: "Interface",
    description:
      "On-chain payment by x402 for charges and checkout links; no credential, the payer is the signature (interface.md §4, operations.md §7).",
  },
  {
    name: "Checkout links",
    group: "Interface",
    description: "Reusable links; each payment materializes its own charge (interface.md §4).",
  },
  {
    name: "PayLinks",
    group: "Interface",
    description: "Budgets an agent pre-authorizes once, drawn down by the merchant (interface.md §4).",
  },
  {
    name: "Approvals",
    group: "Interface",
    description: "Grant or reject a payment held for a human (interface.md §4; shapes from operations.md §4).",
  },
  {
    name: "Webhook endpoints",
    group: "Interface",
    description: "Signed webhook endpoints and their deliveries (interface.md §4 and §6).",
  },
  {
    name: "Agent wallet",
    group: "Interface",
    description: "The agent's balance (interface.md §4; shape from operations.md §2).",
  },
  { name: "KYT", group: "Interface", description: "Address screening (interface.md §4)." },
  { name: "Export", group: "Interface", description: "The audit chain as CSV (interface.md §4)." },
  {
    name: "Console sign-in",
    group: "Operations",
    description: "E-mail code and Cloudflare Access sign-in for console sessions (operations.md §1).",
  },
  {
    name: "Console agents",
    group: "Operations",
    description: "Agents, their policies and manual top-ups (operations.md §2).",
  },
  { name: "Console merchants", group: "Operations", description: "The console's merchant list (operations.md §3)." },
  { name: "Console approvals", group: "Operations", description: "Approvals waiting for a human (operations.md §4)." },
  {
    name: "Operator extras",
    group: "Service extras",
    description:
      "What the service adds for operators beyond both documents: the audit chain, the KYT blocklist, console users, sign-out, endpoint removal, secret rotation and redelivery.",
  },
  {
    name: "MCP",
    group: "Service extras",
    description: "The Model Context Protocol endpoint for agents (streamable HTTP, stateless JSON answers).",
  },
  { name: "Documentation", group: "Service extras", description: "This document and its reference page." },
  {
    name: "Console pages",
    group: "Console pages",
    description:
      "The server-rendered web console (text/html). A page session is the console token in the `console_session` cookie; every POST carries the page's `_csrf` field.",
  },
] as const;

// ---------------------------------------------------------------------------
// Responses every operation of a kind shares.

const json = (
  schema: z.ZodType | z.ZodType[],
  description: string,
  extra: Partial<ResponseSpec> = {},
): ResponseSpec => ({ description, schema, ...extra });
const error = (description: string) => json(r.ErrorBody, description);

const RATE_LIMITED: ResponseSpec = {
  ...error("Too many requests (`too_many_requests`); `Retry-After` says when to come back."),
  headers: { "Retry-After": "Seconds to wait." },
  generic: true,
  component: "RateLimited",
};
const CRASHED: ResponseSpec = {
  ...json(r.InternalError, "An unexpected failure, with the request id the log carries."),
  generic: true,
  component: "InternalError",
};
const TOO_LARGE: ResponseSpec = {
  ...error("The body is over 64 KiB (`payload_too_large`)."),
  generic: true,
  component: "PayloadTooLarge",
};
const OVERLOADED: ResponseSpec = {
  ...error("A wallet or ledger object shedding load (`overloaded`); retry after `Retry-After`."),
  headers: { "Retry-After": "Seconds to wait." },
  generic: true,
  component: "Overloaded",
};
const NOT_UTF8: ResponseSpec = {
  ...error(
    "The JSON body declares a charset other than UTF-8, or starts with a byte-order mark (`unsupported_media_type`).",
  ),
  generic: true,
  component: "UnsupportedMediaType",
};
const INVALID: ResponseSpec = {
  ...json(r.InvalidRequest, "An invalid body, path or query: `invalid_request` with `issues`."),
  component: "InvalidRequest",
};
const NOT_FOUND = (what: string) => error(`Unknown ${what}.`);

const IDEMPOTENCY_KEY: HeaderParam = {
  name: "Idempotency-Key",
  description:
    "Optional, 1 to 255 printable ASCII characters, scoped to the credential. The same key with the same request replays the first answer (with `Idempotent-Replayed: true`); with another request it is 409 `idempotency_key_reused`; while the first is still running, 409 `idempotency_key_in_use`.",
};
const IDEMPOTENCY_CONFLICT: ResponseSpec = {
  ...error("`idempotency_key_reused` or `idempotency_key_in_use`."),
  generic: true,
  component: "IdempotencyConflict",
};
const BAD_IDEMPOTENCY_KEY: ResponseSpec = {
  ...json(r.InvalidRequest, "A malformed `Idempotency-Key` header."),
  generic: true,
  component: "InvalidIdempotencyKey",
};
const UNAUTHENTICATED: ResponseSpec = {
  ...json(
    r.CredentialRequired,
    "No credential, or not a valid one; the message names the credential this operation expects.",
  ),
  component: "CredentialRequired",
};
const WRONG_CREDENTIAL: ResponseSpec = {
  ...json(r.CredentialNotAllowed, "A valid credential of another kind."),
  component: "CredentialNotAllowed",
};

const X402_HEADERS: HeaderParam[] = [
  {
    name: "X-PAYMENT",
    description: "The signed x402 payment: base64url (or padded base64) of the payload JSON (x402 version 1).",
  },
  { name: "PAYMENT-SIGNATURE", description: "The same payment as x402 version 2 clients send it." },
];

/** The credential responses and the shared failures, added to every operation by its kind. */
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
  return { ...op, responses: { ...shared, ...op.responses } };
}

// ---------------------------------------------------------------------------
// Console pages (text/html), documented for completeness; their handlers read form fields themselves.

const HTML = (description: string): ResponseSpec => ({ description, contentType: "text/html" });
const SEE_OTHER = (where: string): ResponseSpec => ({
  description: `Redirect (${where}).`,
  headers: { Location: "Where to go next." },
});
const CSRF: ResponseSpec = error("The `_csrf` field is missing or wrong (`csrf_token_invalid`).");
const PAGE_SIGN_IN: ResponseSpec = SEE_OTHER("no page session: to /console/sign-in");
const PAGE_NOT_FOUND: ResponseSpec = error("Unknown object (`not_found`).");

const page = (
  method: Method,
  path: string,
  operationId: string,
  summary: string,
  responses: Record<number, ResponseSpec>,
  form?: Record<string, string>,
): Operation => ({
  method,
  path,
  operationId,
  summary,
  tag: "Console pages",
  auth: "page",
  ...(form ? { form: { _csrf: "The CSRF token of the page the form is on.", ...form } } : {}),
  responses: method === "post" ? { 303: PAGE_SIGN_IN, 403: CSRF, ...responses } : { 303: PAGE_SIGN_IN, ...responses },
});

const PAGES: Operation[] = [
  {
    method: "get",
    path: "/console",
    operationId: "consoleRoot",
    summary: "Console entry (redirects to the overview)",
    tag: "Console pages",
    auth: "public",
    responses: { 302: SEE_OTHER("to /console/ui") },
  },
  {
    method: "get",
    path: "/console/sign-in",
    operationId: "consoleSignInPage",
    summary: "Sign-in page",
    tag: "Console pages",
    auth: "public",
    responses: { 200: HTML("The e-mail form; sets the pre-session CSRF cookie.") },
  },
  {
    method: "post",
    path: "/console/sign-in",
    operationId: "consoleSignInSubmit",
    summary: "Ask for a sign-in code",
    tag: "Console pages",
    auth: "public",
    form: { _csrf: "The sign-in page's CSRF token.", email: "The e-mail address." },
    responses: {
      200: HTML("The code form."),
      400: HTML("Not an e-mail address."),
      403: CSRF,
      429: HTML("Too many attempts."),
    },
  },
  {
    method: "post",
    path: "/console/sign-in/verify",
    operationId: "consoleSignInVerify",
    summary: "Sign in with the code",
    tag: "Console pages",
    auth: "public",
    form: { _csrf: "The code form's CSRF token.", email: "The e-mail address.", code: "The 6-digit code." },
    responses: {
      303: SEE_OTHER("signed in: to /console/ui, with the session cookie"),
      401: HTML("The code is not valid."),
      403: CSRF,
    },
  },
  page(
    "post",
    "/console/sign-out",
    "consoleSignOutPage",
    "Sign out of the console",
    { 303: SEE_OTHER("to /console/sign-in; the session is revoked") },
    {},
  ),
  page("get", "/console/ui", "consoleOverview", "Overview", { 200: HTML("Today's totals and paid volume by hour.") }),
  page("get", "/console/ui/merchants", "consoleMerchantsPage", "Merchants", {
    200: HTML("The merchant list and registration form."),
  }),
  page("get", "/console/ui/receiving", "consoleReceivingPage", "Receiving addresses", {
    200: HTML(
      "What x402 payments left on each charge's and link's receiving address: settled per the ledger, held per the chain.",
    ),
  }),
  page(
    "post",
    "/console/ui/merchants",
    "consoleRegisterMerchant",
    "Register a merchant",
    { 200: HTML("The list, with the new API key shown once.") },
    { name: "Merchant name.", category: "Optional category." },
  ),
  page(
    "post",
    "/console/ui/merchants/:merchantId/keys",
    "consoleRollMerchantKey",
    "Roll a merchant's API key",
    {
      200: HTML("The list, with the new API key shown once and when the old one stops."),
      303: SEE_OTHER("back to the merchants, with a notice, when the grace is refused"),
      404: PAGE_NOT_FOUND,
    },
    {
      graceSeconds: "Seconds the old key keeps working, 0 to 604800 (default 86400).",
    },
  ),
  page("get", "/console/ui/agents", "consoleAgentsPage", "Agents", { 200: HTML("The agent list and creation form.") }),
  page(
    "post",
    "/console/ui/agents",
    "consoleCreateAgent",
    "Create an agent",
    { 200: HTML("The list, with the new agent key shown once.") },
    {
      name: "Agent name.",
      credit: "Optional first credit in cents.",
      maxPerTransactionUsdCents: "Optional.",
      dailyLimitUsdCents: "Optional.",
      approvalThresholdUsdCents: "Optional.",
      allowedCategories: "Optional, comma-separated.",
    },
  ),
  page("get", "/console/ui/agents/:agentId", "consoleAgentPage", "One agent", {
    200: HTML("Balance, policy and recent payments."),
    404: PAGE_NOT_FOUND,
  }),
  page(
    "post",
    "/console/ui/agents/:agentId/policy",
    "consoleSetPolicy",
    "Save an agent's policy",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    {
      maxPerTransactionUsdCents: "Optional.",
      dailyLimitUsdCents: "Optional.",
      approvalThresholdUsdCents: "Optional.",
      allowedCategories: "Optional, comma-separated.",
    },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/credit",
    "consoleCreditAgent",
    "Credit an agent",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    { amount: "Cents.", reference: "Optional." },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/keys",
    "consoleRollAgentKey",
    "Roll an agent's API key",
    {
      200: HTML("The agent, with the new API key shown once and when the old one stops."),
      303: SEE_OTHER("back to the agent, with a notice, when the grace is refused"),
      404: PAGE_NOT_FOUND,
    },
    {
      graceSeconds: "Seconds the old key keeps working, 0 to 604800 (default 86400).",
    },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/freeze",
    "consoleFreezeAgent",
    "Freeze an agent",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    { reason: "Optional, up to 200 characters." },
  ),
  page(
    "post",
    "/console/ui/agents/:agentId/unfreeze",
    "consoleUnfreezeAgent",
    "Unfreeze an agent",
    { 303: SEE_OTHER("back to the agent, with a notice"), 404: PAGE_NOT_FOUND },
    {},
  ),
  page("get", "/console/ui/approvals", "consoleApprovalsPage", "Pending approvals", {
    200: HTML("Approvals waiting for a human."),
  }),
  page(
    "post",
    "/console/ui/approvals/:id/:decision{grant|reject}",
    "consoleDecideApproval",
    "Grant or reject an approval",
    { 303: SEE_OTHER("back to the approvals, with the outcome"), 404: PAGE_NOT_FOUND },
    {},
  ),
  page("get", "/console/ui/webhooks", "consoleWebhooksPage", "Webhook endpoints", {
    200: HTML("Endpoints and the creation form."),
  }),
  page(
    "post",
    "/console/ui/webhooks",
    "consoleCreateWebhook",
    "Add a webhook endpoint",
    { 200: HTML("The list, with the signing secret shown once (or the refusal).") },
    {
      url: "Receiving URL.",
      events: "Event kinds (repeatable); none means all.",
      merchantId: "Optional merchant.",
    },
  ),
  page("get", "/console/ui/webhooks/:id", "consoleWebhookPage", "An endpoint's deliveries", {
    200: HTML("Recent deliveries."),
    404: PAGE_NOT_FOUND,
  }),
  page("get", "/console/ui/webhooks/:id/deliveries/:deliveryId", "consoleDeliveryPage", "A delivery's attempts", {
    200: HTML("Every attempt of the delivery."),
  }),
  page(
    "post",
    "/console/ui/webhooks/:id/deliveries/:deliveryId/redeliver",
    "consoleRedeliver",
    "Send a delivery again",
    { 303: SEE_OTHER("back to the endpoint, with a notice") },
    {},
  ),
  page("get", "/console/ui/kyt", "consoleKytPage", "KYT screening", { 200: HTML("The screening form.") }),
  page(
    "post",
    "/console/ui/kyt",
    "consoleScreen",
    "Screen an address",
    { 200: HTML("The verdict.") },
    { address: "EVM address." },
  ),
  page("get", "/console/ui/transactions", "consoleTransactionsPage", "Transactions", {
    200: HTML("Audit events of a date range and the chain's verification."),
  }),
  {
    ...page("get", "/console/ui/transactions.csv", "consoleTransactionsCsv", "Transactions as CSV", {
      200: { description: "The audit chain as CSV.", contentType: "text/csv" },
      400: INVALID,
    }),
    query: audit.ExportQuery,
  },
  page("get", "/console/ui/users", "consoleUsersPage", "Console users", { 200: HTML("Who may sign in.") }),
  page(
    "post",
    "/console/ui/users",
    "consoleAddUserPage",
    "Allow an e-mail to sign in",
    { 303: SEE_OTHER("back to the users, with a notice") },
    { email: "E-mail address." },
  ),
];

// ---------------------------------------------------------------------------
// The JSON API.

const API: Operation[] = [
  // Merchants
  {
    method: "post",
    path: "/merchants",
    operationId: "registerMerchant",
    summary: "Register a merchant",
    description: "Returns the merchant's API key, shown exactly once.",
    tag: "Merchants",
    auth: "console",
    body: body("RegisterMerchantRequest", merchants.RegisterBody),
    responses: { 201: json(r.MerchantRegistered, "Registered."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/me",
    operationId: "getMerchantMe",
    summary: "The merchant's own record",
    tag: "Merchants",
    auth: "merchant",
    responses: { 200: json(r.MerchantMe, "The merchant.") },
  },
  {
    method: "put",
    path: "/merchant/payout-address",
    operationId: "setPayoutAddress",
    summary: "Set the payout address",
    description: "The address is screened (KYT) first; a flagged address is refused and not stored.",
    tag: "Merchants",
    auth: "merchant",
    body: body("PayoutAddressRequest", merchants.PayoutAddressBody),
    responses: {
      200: json(r.PayoutAddressSet, "Stored, with the screening result."),
      400: INVALID,
      403: json(
        [r.PayoutAddressFlagged, r.CredentialNotAllowed],
        "Flagged by screening (body includes `verdict`), or a credential of another kind.",
      ),
    },
  },
  {
    method: "post",
    path: "/console/merchants/:merchantId/keys",
    operationId: "rollMerchantKey",
    summary: "Roll a merchant's API key",
    description:
      "A new `sk_mch_` key, shown once. The key it replaces keeps working for `graceSeconds` (default 86,400; 0 ends it at once), then answers 401; at most two keys work at a time. An ended key stops working everywhere within 5 seconds. Written to the audit chain with the console user.",
    tag: "Console merchants",
    auth: "console",
    params: merchants.MerchantParam,
    body: body("RollKeyRequest", RollKeyBody),
    bodyOptional: true,
    responses: {
      201: json(r.MerchantKeyRolled, "The new key, shown once."),
      400: INVALID,
      404: error("`merchant_not_found`."),
      503: OVERLOADED,
    },
  },
  {
    method: "get",
    path: "/console/merchants",
    operationId: "listMerchants",
    summary: "List merchants",
    tag: "Console merchants",
    auth: "console",
    query: merchants.ListQuery,
    responses: { 200: json(r.ConsoleMerchantList, "Merchants, newest first."), 400: INVALID },
  },

  // KYT
  {
    method: "post",
    path: "/kyt/screen",
    operationId: "screenAddress",
    summary: "Screen an address",
    tag: "KYT",
    auth: "console",
    body: body("ScreenRequest", kyt.ScreenBody),
    responses: { 200: json(r.KytResult, "The verdict."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/kyt/blocklist",
    operationId: "listBlocklist",
    summary: "The operators' KYT blocklist",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(r.BlocklistList, "Entries, newest first.") },
  },
  {
    method: "post",
    path: "/console/kyt/blocklist",
    operationId: "addToBlocklist",
    summary: "Block an address",
    tag: "Operator extras",
    auth: "console",
    body: body("BlocklistRequest", kyt.BlocklistBody),
    responses: { 201: json(r.BlocklistAdded, "Added (or its reason updated)."), 400: INVALID },
  },

  // Charges
  {
    method: "post",
    path: "/merchant/charges",
    operationId: "createCharge",
    summary: "Create a charge",
    description: "Fires `charge.created`.",
    tag: "Charges",
    auth: "merchant",
    body: body("CreateChargeRequest", charges.CreateChargeBody),
    responses: { 201: json(r.Charge, "The pending charge."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/charges",
    operationId: "listCharges",
    summary: "The merchant's charges",
    description: "The last 100, newest first.",
    tag: "Charges",
    auth: "merchant",
    responses: { 200: json(r.ChargeList, "Charges.") },
  },
  {
    method: "get",
    path: "/charges/:chargeId",
    operationId: "getCharge",
    summary: "Read a charge",
    description: "The charge id is the capability to read it.",
    tag: "Charges",
    auth: "public",
    params: charges.ChargeIdParam,
    responses: { 200: json(r.Charge, "The charge."), 404: NOT_FOUND("charge") },
  },
  {
    method: "post",
    path: "/charges/:chargeId/pay",
    operationId: "payCharge",
    summary: "Pay a charge from the agent's wallet",
    description:
      "The agent's policy decides: hard limits (per-transaction cap, category, daily limit) reject with 402; over the approval threshold the payment is held for a human (402 `pendingApproval`, nothing charged); then the balance.",
    tag: "Charges",
    auth: "agent",
    params: charges.ChargeIdParam,
    responses: {
      200: json(r.ChargePaid, "Paid."),
      402: json(
        [r.PendingApproval, r.ErrorBody],
        "Held for a human (`pendingApproval`), or refused by the policy (`excede_tope_por_transaccion`, `categoria_no_permitida`, `excede_limite_diario`, `saldo_insuficiente`).",
      ),
      403: json(
        [r.ErrorBody, r.CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`): an operator stopped its payments; or a credential of another kind.",
      ),
      404: NOT_FOUND("charge"),
      409: error("The charge is not pending (`charge_not_pending`)."),
      503: OVERLOADED,
    },
  },

  // x402
  {
    method: "get",
    path: "/charges/:chargeId/x402",
    operationId: "payChargeX402",
    summary: "Pay a charge by x402",
    description:
      "Without a payment header: 402 with the terms (also base64 in `PAYMENT-REQUIRED`), or 200 with the charge if it is already paid. With `X-PAYMENT` (or `PAYMENT-SIGNATURE`): verified and settled, 200 with the settlement (also in `X-PAYMENT-RESPONSE` and `PAYMENT-RESPONSE`).",
    tag: "x402",
    auth: "public",
    params: x402.ChargeParam,
    headers: X402_HEADERS,
    responses: {
      200: json([r.Charge, r.X402Settled], "The charge, already paid; or the settlement of this payment.", {
        headers: {
          "X-PAYMENT-RESPONSE": "base64 JSON settlement (v1).",
          "PAYMENT-RESPONSE": "base64 JSON settlement (v2).",
        },
      }),
      202: {
        ...json(r.X402SettlementPending, "Settlement outcome not known yet; ask again after `Retry-After`."),
        headers: { "Retry-After": "Seconds." },
      },
      402: json(
        r.X402PaymentRequired,
        "Payment required: the terms; or `Pago inválido` / `Liquidación fallida` with the reason.",
        { headers: { "PAYMENT-REQUIRED": "base64 JSON of the x402 version 2 PaymentRequired." } },
      ),
      404: NOT_FOUND("charge"),
      503: error(
        "x402 is not configured on this deployment (`x402_not_configured`); or the chain or the remote facilitator could not be asked before anything was reserved (`chain_unavailable`, `facilitator_unavailable`, with `Retry-After`: send the same payment again).",
      ),
    },
  },
  {
    method: "get",
    path: "/console/x402/receiving-addresses",
    operationId: "listReceivingAddresses",
    summary: "What x402 payments left on the receiving addresses",
    description:
      "Each charge and checkout link offered for x402 has a receiving address of its own (its `payTo`), so an authorization pays only what it was made for. This lists the addresses that were paid, most recently paid first, with what was settled to each and what the chain says each holds now; the totals cover all of them.",
    tag: "x402",
    auth: "console",
    query: x402.ReceivingQuery,
    responses: {
      200: json(r.ReceivingAddressReport, "The report."),
      400: INVALID,
      503: error("x402 is not configured on this deployment (`x402_not_configured`)."),
    },
  },
  ...(["get", "post"] as const).map(
    (method): Operation => ({
      method,
      path: "/checkout/:token/x402",
      operationId: method === "get" ? "payCheckoutX402Get" : "payCheckoutX402",
      summary:
        method === "get"
          ? "Checkout link x402 terms (or pay, as official clients retry)"
          : "Pay a checkout link by x402",
      description:
        "Each paid call creates a new charge against the link. Official x402 clients retry with their first method, so a GET with a payment header settles exactly as the POST does.",
      tag: "x402",
      auth: "public",
      params: x402.TokenParam,
      headers: X402_HEADERS,
      responses: {
        200: json(r.X402Settled, "Settled: a new paid charge.", {
          headers: {
            "X-PAYMENT-RESPONSE": "base64 JSON settlement (v1).",
            "PAYMENT-RESPONSE": "base64 JSON settlement (v2).",
          },
        }),
        202: {
          ...json(r.X402SettlementPending, "Settlement outcome not known yet."),
          headers: { "Retry-After": "Seconds." },
        },
        402: json(r.X402PaymentRequired, "The terms; or `Pago inválido` / `Liquidación fallida`.", {
          headers: { "PAYMENT-REQUIRED": "base64 JSON of the x402 version 2 PaymentRequired." },
        }),
        404: NOT_FOUND("checkout token"),
        409: error("The link is disabled (`checkout_link_disabled`)."),
        503: error(
          "x402 is not configured (`x402_not_configured`); or the chain or the remote facilitator could not be asked (`chain_unavailable`, `facilitator_unavailable`, with `Retry-After`).",
        ),
      },
    }),
  ),

  // Checkout links
  {
    method: "post",
    path: "/merchant/checkout",
    operationId: "createCheckoutLink",
    summary: "Create a checkout link",
    tag: "Checkout links",
    auth: "merchant",
    body: body("CreateCheckoutLinkRequest", checkout.CreateBody),
    responses: { 201: json(r.CheckoutLinkCreated, "The link; counters start at 0."), 400: INVALID },
  },
  {
    method: "get",
    path: "/merchant/checkout-links",
    operationId: "listCheckoutLinks",
    summary: "The merchant's checkout links",
    tag: "Checkout links",
    auth: "merchant",
    query: checkout.ListQuery,
    responses: { 200: json(r.CheckoutLinkList, "Links, newest first, and the total."), 400: INVALID },
  },
  {
    method: "patch",
    path: "/merchant/checkout-links/:token",
    operationId: "setCheckoutLinkActive",
    summary: "Disable or enable a checkout link",
    tag: "Checkout links",
    auth: "merchant",
    params: checkout.TokenParam,
    body: body("SetCheckoutLinkActiveRequest", checkout.PatchBody),
    responses: { 200: json(r.CheckoutLink, "The link."), 400: INVALID, 404: NOT_FOUND("checkout token") },
  },
  {
    method: "get",
    path: "/checkout/:token",
    operationId: "getCheckoutLink",
    summary: "View a checkout link",
    description: "Every call counts a visit, a disabled link's too.",
    tag: "Checkout links",
    auth: "public",
    params: checkout.TokenParam,
    responses: {
      200: json(r.CheckoutLinkPublic, "The public view of an active link."),
      404: NOT_FOUND("checkout token"),
      409: error("The link is disabled (`checkout_link_disabled`)."),
    },
  },
  {
    method: "post",
    path: "/checkout/:token/pay",
    operationId: "payCheckoutLink",
    summary: "Pay a checkout link from the agent's wallet",
    description: "Creates a new charge against the link and pays it, under the agent's policy.",
    tag: "Checkout links",
    auth: "agent",
    params: checkout.TokenParam,
    responses: {
      200: json(r.CheckoutPaid, "Paid: the agent's new charge."),
      402: json([r.PendingApproval, r.ErrorBody], "Held for a human (`pendingApproval`), or refused by the policy."),
      403: json(
        [r.ErrorBody, r.CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`): an operator stopped its payments; or a credential of another kind.",
      ),
      404: NOT_FOUND("checkout token"),
      409: error("The link is disabled (`checkout_link_disabled`)."),
      503: OVERLOADED,
    },
  },

  // PayLinks
  {
    method: "post",
    path: "/merchant/paylinks",
    operationId: "createPaylink",
    summary: "Create a PayLink",
    tag: "PayLinks",
    auth: "merchant",
    body: body("CreatePaylinkRequest", paylinks.CreateBody),
    responses: { 201: json(r.PaylinkCreated, "The PayLink, with `acceptUrl`."), 400: INVALID },
  },
  {
    method: "get",
    path: "/pl/:code",
    operationId: "getPaylink",
    summary: "View a PayLink",
    tag: "PayLinks",
    auth: "public",
    params: paylinks.CodeParam,
    responses: { 200: json(r.PaylinkPublic, "The public view."), 404: error("`paylink_not_found`.") },
  },
  {
    method: "post",
    path: "/pl/:code/accept",
    operationId: "acceptPaylink",
    summary: "Accept a PayLink",
    description: "Idempotent per (PayLink, agent); fires `paylink.accepted` to the merchant's webhooks.",
    tag: "PayLinks",
    auth: "agent",
    params: paylinks.CodeParam,
    responses: {
      200: json(r.PaylinkAccepted, "The grant and the PayLink as this agent sees it."),
      403: json(
        [r.ErrorBody, r.CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`): an operator stopped its payments; or a credential of another kind.",
      ),
      404: error("`paylink_not_found`."),
      409: error("`paylink_expired`."),
    },
  },
  {
    method: "post",
    path: "/merchant/paylinks/:code/charge",
    operationId: "drawPaylink",
    summary: "Draw on an agent's PayLink grant",
    description:
      "The remaining budget is enforced before the agent wallet is touched; a refused draw leaves no charge.",
    tag: "PayLinks",
    auth: "merchant",
    params: paylinks.CodeParam,
    body: body("DrawPaylinkRequest", paylinks.DrawBody),
    responses: {
      200: json(r.PaylinkDrawn, "Paid, with the grant's figures."),
      400: INVALID,
      402: error(
        "`excede_presupuesto_restante_<N>` (N = cents left), `excede_tope_por_uso`, or the agent's hard policy limits.",
      ),
      404: error("`paylink_not_found` (wrong code, or another merchant's)."),
      409: error(
        "`paylink_exhausted`, `max_uses_alcanzado`, `paylink_expired` or `sin_grant_del_agente`; or the agent is frozen (`agent_frozen`).",
      ),
      503: OVERLOADED,
    },
  },

  // Agents
  {
    method: "post",
    path: "/console/agents",
    operationId: "createAgent",
    summary: "Create an agent",
    description: "Returns the agent's API key, shown once.",
    tag: "Console agents",
    auth: "console",
    body: body("CreateAgentRequest", agents.CreateAgentBody),
    responses: { 201: json(r.AgentCreated, "Created."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/agents",
    operationId: "listAgents",
    summary: "List agents",
    tag: "Console agents",
    auth: "console",
    query: agents.ListQuery,
    responses: { 200: json(r.AgentList, "Agents."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/agents/:agentId",
    operationId: "getAgent",
    summary: "Read an agent",
    tag: "Console agents",
    auth: "console",
    params: agents.AgentParam,
    responses: { 200: json(r.Agent, "The agent."), 404: error("`agent_not_found`.") },
  },
  {
    method: "put",
    path: "/console/agents/:agentId/policy",
    operationId: "setAgentPolicy",
    summary: "Replace an agent's policy",
    tag: "Console agents",
    auth: "console",
    params: agents.AgentParam,
    body: PolicySchema,
    responses: { 200: json(r.PolicySet, "The stored policy."), 400: INVALID, 404: error("`agent_not_found`.") },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/credits",
    operationId: "creditAgent",
    summary: "Top up an agent's wallet",
    description: "A manual credit, written to the audit chain.",
    tag: "Console agents",
    auth: "console",
    params: agents.AgentParam,
    body: body("CreditAgentRequest", agents.CreditBody),
    responses: {
      200: json(r.CreditApplied, "The new balance."),
      400: INVALID,
      404: error("`agent_not_found`."),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/keys",
    operationId: "rollAgentKey",
    summary: "Roll an agent's API key",
    description:
      "A new `svc_sk_` key, shown once. The key it replaces keeps working for `graceSeconds` (default 86,400; 0 ends it at once), then answers 401; at most two keys work at a time, so rolling again ends the older one's grace at once. An ended key stops working everywhere within 5 seconds. Written to the audit chain with the console user.",
    tag: "Console agents",
    auth: "console",
    params: agents.AgentParam,
    body: body("RollKeyRequest", RollKeyBody),
    bodyOptional: true,
    responses: {
      201: json(r.AgentKeyRolled, "The new key, shown once."),
      400: INVALID,
      404: error("`agent_not_found`."),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/freeze",
    operationId: "freezeAgent",
    summary: "Freeze an agent",
    description:
      "Nothing of the agent's money moves until it is unfrozen: its payments (`/charges/:id/pay`, `/checkout/:token/pay`, `/pl/:code/accept`, the MCP paying tools) answer 403 `agent_frozen`, a merchant's draw on its grant and the grant of its approvals 409 `agent_frozen` (the approval stays pending). Every payment lands before the freeze or is refused after it. Reads keep working. Freezing a frozen agent changes nothing. Written to the audit chain with the console user and the reason.",
    tag: "Console agents",
    auth: "console",
    params: agents.AgentParam,
    body: body("FreezeAgentRequest", agents.FreezeBody),
    bodyOptional: true,
    responses: { 200: json(r.AgentFrozen, "Frozen."), 400: INVALID, 404: error("`agent_not_found`."), 503: OVERLOADED },
  },
  {
    method: "post",
    path: "/console/agents/:agentId/unfreeze",
    operationId: "unfreezeAgent",
    summary: "Unfreeze an agent",
    description: "Its payments are decided by its policy again. Written to the audit chain with the console user.",
    tag: "Console agents",
    auth: "console",
    params: agents.AgentParam,
    body: body("UnfreezeAgentRequest", agents.NoBody),
    bodyOptional: true,
    responses: {
      200: json(r.AgentFrozen, "Not frozen."),
      400: INVALID,
      404: error("`agent_not_found`."),
      503: OVERLOADED,
    },
  },
  {
    method: "get",
    path: "/balance",
    operationId: "getBalance",
    summary: "The agent's balance",
    tag: "Agent wallet",
    auth: "agent",
    responses: { 200: json(r.Balance, "Balance, on-chain deposit address, and whether the wallet is frozen.") },
  },

  // Approvals
  {
    method: "get",
    path: "/console/approvals",
    operationId: "listApprovals",
    summary: "List approvals",
    tag: "Console approvals",
    auth: "console",
    query: approvals.ListQuery,
    responses: { 200: json(r.ApprovalList, "Approvals, newest first."), 400: INVALID },
  },
  {
    method: "post",
    path: "/approvals/:id/grant",
    operationId: "grantApproval",
    summary: "Grant an approval",
    description:
      "Pays the held charge; 402 if the balance or hard limits no longer allow it (the approval stays pending).",
    tag: "Approvals",
    auth: "console",
    params: approvals.ApprovalParam,
    responses: {
      200: json(r.ApprovalGranted, "Granted; the charge is paid."),
      402: error("The policy or balance refuses it now."),
      404: error("`approval_not_found`."),
      409: error(
        "The approval is not pending or has expired (`approval_not_pending`, `approval_expired`), the charge is no longer pending (`charge_not_pending`), the checkout link it was born from is disabled (`checkout_link_disabled`), or the agent is frozen (`agent_frozen`; the approval stays pending).",
      ),
      503: OVERLOADED,
    },
  },
  {
    method: "post",
    path: "/approvals/:id/reject",
    operationId: "rejectApproval",
    summary: "Reject an approval",
    description: "The charge stays pending.",
    tag: "Approvals",
    auth: "console",
    params: approvals.ApprovalParam,
    responses: {
      200: json(r.ApprovalRejected, "Rejected."),
      404: error("`approval_not_found`."),
      409: error("Not pending (`approval_not_pending`), or expired."),
    },
  },

  // Audit
  {
    method: "get",
    path: "/export/transactions.csv",
    operationId: "exportTransactions",
    summary: "Export the audit chain as CSV",
    description:
      "`from` and `to` are inclusive UTC days; the default is the last 30 days. Each row carries its sequence number and event hash.",
    tag: "Export",
    auth: "console",
    query: audit.ExportQuery,
    responses: {
      200: {
        description:
          "CSV: seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash",
        contentType: "text/csv",
      },
      400: INVALID,
    },
  },
  {
    method: "get",
    path: "/console/audit",
    operationId: "auditPage",
    summary: "Page through the audit chain",
    tag: "Operator extras",
    auth: "console",
    query: audit.PageQuery,
    responses: { 200: json(r.AuditPage, "Events after `afterSeq`."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/audit/verify",
    operationId: "verifyAuditChain",
    summary: "Verify the audit chain",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(r.ChainVerdict, "The verdict; names the first broken row, if any.") },
  },

  // Webhooks
  {
    method: "post",
    path: "/settings/webhooks",
    operationId: "createWebhookEndpoint",
    summary: "Add a webhook endpoint",
    description:
      "The signing secret is shown once. With `merchantId`, only that merchant's events; without, every event.",
    tag: "Webhook endpoints",
    auth: "console",
    body: body("CreateWebhookEndpointRequest", webhooks.CreateBody),
    responses: { 201: json(r.WebhookEndpointCreated, "Created."), 400: INVALID },
  },
  {
    method: "get",
    path: "/settings/webhooks",
    operationId: "listWebhookEndpoints",
    summary: "List webhook endpoints",
    tag: "Webhook endpoints",
    auth: "console",
    responses: { 200: json(r.WebhookEndpointList, "Endpoints, without secrets.") },
  },
  {
    method: "delete",
    path: "/settings/webhooks/:id",
    operationId: "deleteWebhookEndpoint",
    summary: "Remove a webhook endpoint",
    tag: "Operator extras",
    auth: "console",
    params: webhooks.IdParam,
    responses: {
      200: json(r.WebhookEndpointDeleted, "Removed; nothing more is delivered to it."),
      404: error("`webhook_endpoint_not_found`."),
    },
  },
  {
    method: "post",
    path: "/settings/webhooks/:id/rotate-secret",
    operationId: "rotateWebhookSecret",
    summary: "Rotate an endpoint's signing secret",
    description: "During the grace period deliveries carry a signature with each secret.",
    tag: "Operator extras",
    auth: "console",
    params: webhooks.IdParam,
    body: body("RotateWebhookSecretRequest", webhooks.RotateBody),
    bodyOptional: true,
    responses: {
      200: json(r.WebhookSecretRotated, "The new secret, shown once."),
      400: INVALID,
      404: error("`webhook_endpoint_not_found`."),
    },
  },
  {
    method: "get",
    path: "/settings/webhooks/:id/deliveries",
    operationId: "listWebhookDeliveries",
    summary: "An endpoint's recent deliveries",
    tag: "Webhook endpoints",
    auth: "console",
    params: webhooks.IdParam,
    query: webhooks.DeliveriesQuery,
    responses: {
      200: json(r.WebhookDeliveryList, "Deliveries, newest first."),
      400: INVALID,
      404: error("`webhook_endpoint_not_found`."),
    },
  },
  {
    method: "post",
    path: "/settings/webhooks/:id/deliveries/:deliveryId/redeliver",
    operationId: "redeliverWebhook",
    summary: "Send a delivery again",
    tag: "Operator extras",
    auth: "console",
    params: webhooks.DeliveryParam,
    responses: {
      202: json(r.RedeliveryQueued, "Queued."),
      404: error(
        "`webhook_endpoint_not_found` (unknown, or removed with DELETE), or `delivery_not_found` (unknown, or another endpoint's).",
      ),
      409: error(
        "Only a delivered or failed delivery to an endpoint that is not disabled can be sent again (`delivery_not_redeliverable`).",
      ),
    },
  },

  // Console sign-in and users
  {
    method: "post",
    path: "/console/auth/email/start",
    operationId: "startEmailSignIn",
    summary: "E-mail me a sign-in code",
    description: "Always 202: it never reveals whether the address may sign in. The code is valid 10 minutes, 5 tries.",
    tag: "Console sign-in",
    auth: "public",
    body: body("EmailSignInStartRequest", consoleAuth.StartBody),
    responses: {
      202: json(r.EmailCodeSent, "Sent (if the address may sign in)."),
      400: INVALID,
      429: { ...RATE_LIMITED, generic: false },
    },
  },
  {
    method: "post",
    path: "/console/auth/email/verify",
    operationId: "verifyEmailSignIn",
    summary: "Exchange the code for a session token",
    tag: "Console sign-in",
    auth: "public",
    body: body("EmailSignInVerifyRequest", consoleAuth.VerifyBody),
    responses: { 200: json(r.ConsoleSession, "The session token."), 400: INVALID, 401: error("`invalid_code`.") },
  },
  {
    method: "post",
    path: "/console/auth/access",
    operationId: "accessSignIn",
    summary: "Sign in with Cloudflare Access",
    tag: "Console sign-in",
    auth: "public",
    headers: [
      {
        name: "Cf-Access-Jwt-Assertion",
        description: "The Access assertion, verified against the team's key set.",
        required: true,
      },
    ],
    responses: {
      200: json(r.ConsoleSession, "The session token."),
      401: error("`access_assertion_required` or `access_assertion_invalid`."),
      403: error("`not_a_console_user`."),
      404: error("Access is not configured (`access_sign_in_not_configured`)."),
    },
  },
  {
    method: "post",
    path: "/console/auth/sign-out",
    operationId: "signOut",
    summary: "End this console session",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(r.SignedOut, "The token no longer works.") },
  },
  {
    method: "get",
    path: "/console/users",
    operationId: "listConsoleUsers",
    summary: "Who may sign in",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(r.ConsoleUserList, "Configured and added users.") },
  },
  {
    method: "post",
    path: "/console/users",
    operationId: "addConsoleUser",
    summary: "Allow an e-mail address to sign in",
    tag: "Operator extras",
    auth: "console",
    body: body("AddConsoleUserRequest", consoleAuth.UserBody),
    responses: { 201: json(r.ConsoleUserAdded, "Added."), 400: INVALID },
  },

  // MCP
  {
    method: "post",
    path: "/mcp",
    operationId: "mcp",
    summary: "Model Context Protocol (streamable HTTP)",
    description:
      "JSON-RPC 2.0 messages (`initialize`, `tools/list`, `tools/call`, ...) from an agent, answered as JSON. Stateless: no session id, no server-to-client stream. The tools act as the agent whose key is sent, under its policy. Send `Accept: application/json, text/event-stream`.",
    tag: "MCP",
    auth: "agent",
    body: body("JsonRpcRequest", JsonRpcRequest),
    responses: {
      200: json(r.JsonRpcResponse, "The JSON-RPC answer."),
      202: { description: "A notification or a response from the client: accepted, no body." },
      400: json(
        [r.JsonRpcTransportError, r.InvalidRequest],
        "Not JSON-RPC (a JSON-RPC error with a null id), or a malformed Idempotency-Key.",
      ),
      406: json(r.JsonRpcTransportError, "`Accept` must name both application/json and text/event-stream."),
      415: json(r.JsonRpcTransportError, "`Content-Type` must be application/json."),
    },
  },
  ...(["get", "delete"] as const).map(
    (method): Operation => ({
      method,
      path: "/mcp",
      operationId: method === "get" ? "mcpStream" : "mcpEndSession",
      summary: method === "get" ? "No server-to-client stream (stateless)" : "No session to end (stateless)",
      tag: "MCP",
      auth: "agent",
      responses: { 405: { ...error("`method_not_allowed`: only POST."), headers: { Allow: "POST" } } },
    }),
  ),

  // Documentation
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

/** Every documented operation, with the shared responses added. */
export const OPERATIONS: readonly Operation[] = [...API, ...PAGES].map(withShared);
