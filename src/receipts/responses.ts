import { z } from "zod";
import { BaseUnits, CentsIfWhole, named, prefixed, Timestamp, Usd } from "../lib/api-shapes";
import { EvidenceFileSchema } from "./evidence-verify";

/**
 * Response bodies: signed receipts. The body is `{ receipt }`, a compact JWS; the payloads are
 * named here too so the document (and the typed client) describes what a verified receipt holds.
 */

const CompactJws = z.string().regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
const TxHash = z.string().regex(/^0x[0-9a-f]{64}$/);
const AuditSeq = z.number().int().positive().describe("The audit row that records it (`GET /console/audit`).");
const AuditHash = z
  .string()
  .regex(/^[0-9a-f]{64}$/)
  .describe("That row's SHA-256 in the audit chain.");

export const Receipt = named(
  "Receipt",
  z.strictObject({
    receipt: CompactJws.describe(
      "A compact JWS (`typ` `agent-pay-receipt+jwt`, `alg` EdDSA or ES256, the key's `kid`), checked offline against `GET /.well-known/jwks.json`.",
    ),
  }),
);

export const ChargeReceiptPayload = named(
  "ChargeReceiptPayload",
  z.strictObject({
    type: z.literal("charge"),
    chargeId: prefixed("charge"),
    merchantId: prefixed("merchant"),
    amountMinor: CentsIfWhole(
      "The amount in cents; null when it is not a whole number of them (`amountBaseUnits` states it).",
    ),
    amountBaseUnits: BaseUnits.describe("The exact amount in the token's base units (1 cent = 10,000)."),
    currency: Usd,
    method: z.enum(["ledger", "paylink", "x402"]),
    reference: z.string().describe("The payment's reference: `PAY_...`, or the transaction for x402."),
    paidAt: Timestamp,
    payer: z.string().nullable().describe("The paying agent's id, or the x402 payer's on-chain address."),
    network: z.string().nullable().describe("The x402 network; null for a wallet payment."),
    transaction: TxHash.nullable().describe("The x402 settlement's transaction; null for a wallet payment."),
    auditSeq: AuditSeq,
    auditHash: AuditHash,
  }),
  "What a charge receipt's JWS payload holds.",
);

export const PayoutReceiptPayload = named(
  "PayoutReceiptPayload",
  z.strictObject({
    type: z.literal("payout"),
    payoutId: prefixed("payout"),
    merchantId: prefixed("merchant"),
    amountMinor: z.number().int().positive(),
    currency: Usd,
    destination: z.string(),
    transaction: TxHash,
    paidAt: Timestamp,
    auditSeq: AuditSeq,
    auditHash: AuditHash,
  }),
  "What a payout receipt's JWS payload holds.",
);

export const RefundReceiptPayload = named(
  "RefundReceiptPayload",
  z.strictObject({
    type: z.literal("refund"),
    refundId: prefixed("refund"),
    chargeId: prefixed("charge"),
    merchantId: prefixed("merchant"),
    amountMinor: CentsIfWhole(
      "The amount in cents; null when it is not a whole number of them (`amountBaseUnits` states it).",
    ),
    amountBaseUnits: BaseUnits.describe("The exact amount in the token's base units (1 cent = 10,000)."),
    currency: Usd,
    method: z.enum(["ledger", "paylink", "x402"]),
    agentId: z.string().nullable().describe("The agent refunded to its wallet; null for an x402 refund."),
    destination: z.string().nullable().describe("The x402 payer's address the refund was sent to."),
    transaction: TxHash.nullable().describe("The transfer back to the payer, for an x402 refund."),
    succeededAt: Timestamp,
    auditSeq: AuditSeq,
    auditHash: AuditHash,
  }),
  "What a refund receipt's JWS payload holds.",
);

export const AgentX402ReceiptPayload = named(
  "AgentX402ReceiptPayload",
  z.strictObject({
    type: z.literal("agent_x402_payment"),
    paymentId: prefixed("agentX402Payment"),
    agentId: prefixed("agent"),
    resource: z.string(),
    payTo: z.string().describe("Who the authorization paid."),
    network: z.string(),
    asset: z.string(),
    amountMinor: CentsIfWhole(
      "The amount in cents; null when it is not a whole number of them (`amountBaseUnits` states it).",
    ),
    amountBaseUnits: BaseUnits.describe("The exact amount in the token's base units (1 cent = 10,000)."),
    currency: Usd,
    transaction: TxHash.describe("The transaction that used the service's authorization."),
    settledAt: Timestamp,
    auditSeq: AuditSeq,
    auditHash: AuditHash,
  }),
  "What an agent's settled x402 payment's receipt holds.",
);

export const Evidence = named(
  "EvidenceFile",
  EvidenceFileSchema,
  "A paid charge's evidence: its receipt, its audit row, the checkpoint that covers the row with the Merkle path to its root, and the checkpoint's anchoring transaction. Check it offline with `npm run --silent cli -- evidence verify FILE`.",
);
