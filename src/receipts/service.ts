import { type AgentX402PaymentRow, settledAgentX402PaymentRow } from "../agents/x402-payments";
import { archivedReceiptRow, type HistoryStore } from "../audit/archived";
import { type AuditRecord, auditRowOfType, type ReceiptRowType } from "../audit/service";
import { paidChargeRead } from "../charges/statements";
import type { Env } from "../config/env";
import type { ProofSettings } from "../config/proofs";
import { readTogether } from "../db/statements";
import { placementOf } from "../ledger/place";
import { canonicalJson } from "../lib/canonical-json";
import { exactBaseUnitsOf } from "../lib/money";
import { paidPayoutRow } from "../payouts/reads";
import { signJws } from "../proofs/keys";
import { succeededRefundRow } from "../refunds/reads";
import {
  type AuditLink,
  agentX402ReceiptPayload,
  chargeReceiptPayload,
  type PaidChargeRow,
  type PaidPayoutRow,
  payoutReceiptPayload,
  RECEIPT_TYP,
  refundReceiptPayload,
  type SucceededRefundRow,
} from "./payloads";

/*
 * Receipts, read and signed on demand: nothing is stored, since the payload is made of rows that
 * no longer change and EdDSA signs the same bytes the same way. Each read takes the row together
 * with the audit row written in the same batch that completed it (found by charge id, or by the
 * payout or refund id as the row's reference; one D1 batch, one snapshot), and only once it is
 * completed.
 */

/** A place's history: its database and the archive, with its shard's number (what an evidence file names). */
export interface PlacedStore extends HistoryStore {
  shard: number;
}

/**
 * Where the rows of the object `id` names are: the database of the place its id names, and the
 * archive, with the shard's number an evidence file shows. Null for an id naming a shard this
 * deployment does not run: no such object.
 */
export function storeOfId(env: Env, id: string): PlacedStore | null {
  const at = placementOf(env).ofId(id);
  return at && { DB: at.db, ARCHIVE: env.ARCHIVE, shard: at.shard };
}

/**
 * The audit row's part of a completed row: `live` when it is still in D1, or the archived row once it
 * left D1 (src/archive/); a completed row without one is a broken invariant, not a 404.
 */
async function auditOf(
  store: HistoryStore,
  live: AuditRecord | undefined,
  archived: { type: ReceiptRowType; by: { chargeId: string } | { reference: string } },
  what: string,
): Promise<AuditLink & { createdAt: string }> {
  if (live)
    return {
      seq: live.seq,
      hash: live.hash,
      data: live.data,
      createdAt: live.createdAt,
      amountBaseUnits: exactBaseUnitsOf(live),
    };
  const found = await archivedReceiptRow(store, archived.type, archived.by);
  if (!found) throw new Error(`${what} has no audit row`);
  return {
    seq: found.seq,
    hash: found.hash,
    data: canonicalJson(found.data),
    createdAt: found.createdAt,
    amountBaseUnits: exactBaseUnitsOf(found),
  };
}

const sign = (proofs: ProofSettings, payload: Record<string, unknown>) => signJws(proofs, RECEIPT_TYP, payload);

/** A paid charge's receipt, or null while it is unpaid or unknown. */
export async function chargeReceipt(
  store: HistoryStore,
  proofs: ProofSettings,
  chargeId: string,
): Promise<string | null> {
  const by = { chargeId };
  const [[row], [live]] = await readTogether<[PaidChargeRow, AuditRecord]>(
    store.DB,
    paidChargeRead(chargeId),
    auditRowOfType("charge.paid", by),
  );
  if (!row) return null;
  const audit = await auditOf(store, live, { type: "charge.paid", by }, `charge ${chargeId}`);
  return sign(proofs, chargeReceiptPayload(row, audit));
}

/** The merchant's paid payout's receipt, or null while pending, failed, unknown or another merchant's. */
export async function payoutReceipt(
  store: HistoryStore,
  proofs: ProofSettings,
  merchantId: string,
  payoutId: string,
): Promise<string | null> {
  const by = { reference: payoutId };
  const [[row], [live]] = await readTogether<[PaidPayoutRow, AuditRecord]>(
    store.DB,
    paidPayoutRow(payoutId, merchantId),
    auditRowOfType("payout.paid", by),
  );
  if (!row) return null;
  const audit = await auditOf(store, live, { type: "payout.paid", by }, `payout ${payoutId}`);
  return sign(proofs, payoutReceiptPayload(row, audit));
}

/** The merchant's succeeded refund's receipt, or null while pending, failed, unknown or another merchant's. */
export async function refundReceipt(
  store: HistoryStore,
  proofs: ProofSettings,
  merchantId: string,
  refundId: string,
): Promise<string | null> {
  const by = { reference: refundId };
  const [[row], [live]] = await readTogether<[SucceededRefundRow, AuditRecord]>(
    store.DB,
    succeededRefundRow(refundId, merchantId),
    auditRowOfType("charge.refunded", by),
  );
  if (!row) return null;
  const audit = await auditOf(store, live, { type: "charge.refunded", by }, `refund ${refundId}`);
  return sign(proofs, refundReceiptPayload(row, audit));
}

/** The agent's settled x402 payment's receipt, or null while authorized, released, unknown or another agent's. */
export async function agentX402Receipt(
  store: HistoryStore,
  proofs: ProofSettings,
  agentId: string,
  paymentId: string,
): Promise<string | null> {
  const by = { reference: paymentId };
  const type = "agent.x402_payment.settled";
  const [[row], [live]] = await readTogether<[AgentX402PaymentRow, AuditRecord]>(
    store.DB,
    settledAgentX402PaymentRow(paymentId, agentId),
    auditRowOfType(type, by),
  );
  if (!row) return null;
  const audit = await auditOf(store, live, { type, by }, `agent x402 payment ${paymentId}`);
  return sign(proofs, agentX402ReceiptPayload(row, audit));
}
