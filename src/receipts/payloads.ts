/*
 * What a receipt says. Each payload is built from stored rows that no longer change once the
 * payment, payout or refund is done (never a balance, a refunded sum or the time of the read), so
 * the same receipt comes back on every read. Key order is fixed here, not left to the caller.
 */

import type { AgentX402PaymentRow } from "../agents/x402-payments";
import { centsIfWhole, wholeCentsOf } from "../lib/money";
import type { RefundRow } from "../refunds/plans";

/** The JWS `typ` of every receipt; the payload's `type` says which kind. */
export const RECEIPT_TYP = "agent-pay-receipt+jwt";

/** The audit row that records the payment, payout or refund: ties the receipt to the hash chain. */
export interface AuditLink {
  seq: number;
  hash: string;
  /** The row's canonical JSON details. */
  data: string;
  /** The row's exact amount in base units (decimal text). */
  amountBaseUnits: string;
}

export interface PaidChargeRow {
  id: string;
  merchantId: string;
  agentId: string | null;
  amountMinor: number;
  currency: string;
  method: string;
  reference: string;
  paidAt: string;
}

const detailsOf = (audit: AuditLink): Record<string, unknown> => JSON.parse(audit.data) as Record<string, unknown>;
const stringOr = (value: unknown, fallback: string | null) => (typeof value === "string" ? value : fallback);

/**
 * A paid charge. `payer` is the agent for a wallet, checkout link or PayLink payment, the
 * authorization's on-chain address for x402; an x402 charge's reference is its transaction. The
 * exact amount is the payment's audit row's (the charge's cents column holds whole cents only);
 * `amountMinor` is null when it is not a whole number of cents, never a rounded amount.
 */
export function chargeReceiptPayload(charge: PaidChargeRow, audit: AuditLink) {
  const onChain = charge.method === "x402";
  const details = detailsOf(audit);
  const exact = BigInt(audit.amountBaseUnits);
  if (wholeCentsOf(exact) !== charge.amountMinor)
    throw new Error(
      `charge ${charge.id}: its payment's audit row states ${exact} base units, the charge ${charge.amountMinor} cents`,
    );
  return {
    type: "charge" as const,
    chargeId: charge.id,
    merchantId: charge.merchantId,
    amountMinor: centsIfWhole(exact),
    amountBaseUnits: audit.amountBaseUnits,
    currency: charge.currency,
    method: charge.method,
    reference: charge.reference,
    paidAt: charge.paidAt,
    payer: onChain ? stringOr(details.payer, null) : charge.agentId,
    network: onChain ? stringOr(details.network, null) : null,
    transaction: onChain ? charge.reference : null,
    auditSeq: audit.seq,
    auditHash: audit.hash,
  };
}

export interface PaidPayoutRow {
  id: string;
  merchantId: string;
  amountMinor: number;
  currency: string;
  destination: string;
  txHash: string;
  paidAt: string;
}

/** A payout once its transfer is mined (`paid`). */
export const payoutReceiptPayload = (payout: PaidPayoutRow, audit: AuditLink) => ({
  type: "payout" as const,
  payoutId: payout.id,
  merchantId: payout.merchantId,
  amountMinor: payout.amountMinor,
  currency: payout.currency,
  destination: payout.destination,
  transaction: payout.txHash,
  paidAt: payout.paidAt,
  auditSeq: audit.seq,
  auditHash: audit.hash,
});

export type SucceededRefundRow = Pick<
  RefundRow,
  "id" | "chargeId" | "merchantId" | "agentId" | "amountMinor" | "currency" | "method" | "destination" | "txHash"
>;

/**
 * A refund once `succeeded`: to the paying agent's wallet (`agentId`), or on chain to the x402
 * payer (`destination`, `transaction`). When it succeeded is its audit row's time: the refund row
 * keeps no such column, and the row that records the outcome is written in the same batch. The
 * exact amount is that row's, as a charge receipt's is; `amountMinor` is null when it is not a whole
 * number of cents (a refund of a payment below a cent).
 */
export const refundReceiptPayload = (refund: SucceededRefundRow, audit: AuditLink & { createdAt: string }) => ({
  type: "refund" as const,
  refundId: refund.id,
  chargeId: refund.chargeId,
  merchantId: refund.merchantId,
  amountMinor: centsIfWhole(BigInt(audit.amountBaseUnits)),
  amountBaseUnits: audit.amountBaseUnits,
  currency: refund.currency,
  method: refund.method,
  agentId: refund.agentId,
  destination: refund.destination,
  transaction: refund.txHash,
  succeededAt: audit.createdAt,
  auditSeq: audit.seq,
  auditHash: audit.hash,
});

/**
 * An agent's payment of an x402 paywall once `settled`: the transaction that used the service's
 * authorization, to whom and how much (exact, from the payment's settling audit row).
 */
export const agentX402ReceiptPayload = (payment: AgentX402PaymentRow, audit: AuditLink) => ({
  type: "agent_x402_payment" as const,
  paymentId: payment.id,
  agentId: payment.agentId,
  resource: payment.resource,
  payTo: payment.payTo,
  network: payment.network,
  asset: payment.asset,
  amountMinor: centsIfWhole(BigInt(audit.amountBaseUnits)),
  amountBaseUnits: audit.amountBaseUnits,
  currency: "USD",
  transaction: payment.txHash,
  settledAt: payment.settledAt,
  auditSeq: audit.seq,
  auditHash: audit.hash,
});
