import { archivedReceiptRow, type HistoryStore } from "../audit/archived";
import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
import { paidChargeRead } from "../charges/statements";
import { prepared } from "../db/statements";
import { canonicalJson } from "../lib/canonical-json";
import { signJws } from "../proofs/keys";
import type { ProofSettings } from "../config/proofs";
import {
  type AuditLink,
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
 * no longer change and EdDSA signs the same bytes the same way. Each read joins the row to the
 * audit row written in the same batch that completed it (found by charge id, or by the payout or
 * refund id as the row's reference), and only once it is completed.
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

type WithAudit<T> = T & { seq: number | null; hash: string | null; data: string | null; auditAt: string | null };

const AUDIT_COLUMNS = "a.seq, a.hash, a.data, a.created_at AS auditAt";

/** A row's audit part when its audit row is not in D1 (archived). */
const NO_AUDIT = { seq: null, hash: null, data: null, auditAt: null };

/**
 * The audit row's part of a joined row, or of the archived row once it left D1 (src/archive/); a
 * completed row without one is a broken invariant, not a 404.
 */
async function auditOf(
  store: HistoryStore,
  row: WithAudit<unknown>,
  archived: { type: string; by: { chargeId: string } | { reference: string } },
  what: string,
): Promise<AuditLink & { createdAt: string }> {
  if (row.seq !== null && row.hash !== null && row.data !== null && row.auditAt !== null)
    return { seq: row.seq, hash: row.hash, data: row.data, createdAt: row.auditAt };
  const found = await archivedReceiptRow(store, archived.type, archived.by);
  if (!found) throw new Error(`${what} has no audit row`);
  return { seq: found.seq, hash: found.hash, data: canonicalJson(found.data), createdAt: found.createdAt };
}

const sign = (proofs: ProofSettings, payload: Record<string, unknown>) => signJws(proofs, RECEIPT_TYP, payload);

/** A paid charge's receipt, or null while it is unpaid or unknown. */
export async function chargeReceipt(
  store: HistoryStore,
  proofs: ProofSettings,
  chargeId: string,
): Promise<string | null> {
  // The charge and its payment's audit row, in one batch (one snapshot).
  const [charge, paid] = await store.DB.batch([
    prepared(store.DB, paidChargeRead(chargeId)),
    store.DB.prepare(
      `SELECT ${AUDIT_COLUMNS} FROM audit_events a WHERE a.charge_id = ? AND a.type = 'charge.paid' ORDER BY a.seq LIMIT 1`,
    ).bind(chargeId),
  ]);
  const chargeRow = charge?.results[0] as PaidChargeRow | undefined;
  if (!chargeRow) return null;
  const row: WithAudit<PaidChargeRow> = { ...chargeRow, ...NO_AUDIT, ...(paid?.results[0] ?? {}) };
  const audit = await auditOf(store, row, { type: "charge.paid", by: { chargeId } }, `charge ${chargeId}`);
  return sign(proofs, chargeReceiptPayload(row, audit));
}

/** The merchant's paid payout's receipt, or null while pending, failed, unknown or another merchant's. */
export async function payoutReceipt(
  store: HistoryStore,
  proofs: ProofSettings,
  merchantId: string,
  payoutId: string,
): Promise<string | null> {
  const row = await store.DB.prepare(
    `SELECT p.id, p.merchant_id AS merchantId, p.amount_minor AS amountMinor, p.currency, p.destination,
       p.tx_hash AS txHash, p.paid_at AS paidAt, ${AUDIT_COLUMNS}
       FROM payouts p LEFT JOIN audit_events a ON a.reference = p.id AND a.type = 'payout.paid'
       WHERE p.id = ? AND p.merchant_id = ? AND p.status = 'paid' ORDER BY a.seq LIMIT 1`,
  )
    .bind(payoutId, merchantId)
    .first<WithAudit<PaidPayoutRow>>();
  if (!row) return null;
  const audit = await auditOf(store, row, { type: "payout.paid", by: { reference: payoutId } }, `payout ${payoutId}`);
  return sign(proofs, payoutReceiptPayload(row, audit));
}

/** The merchant's succeeded refund's receipt, or null while pending, failed, unknown or another merchant's. */
export async function refundReceipt(
  store: HistoryStore,
  proofs: ProofSettings,
  merchantId: string,
  refundId: string,
): Promise<string | null> {
  const row = await store.DB.prepare(
    `SELECT r.id, r.charge_id AS chargeId, r.merchant_id AS merchantId, r.agent_id AS agentId,
       r.amount_minor AS amountMinor, r.currency, r.method, r.destination, r.tx_hash AS txHash, ${AUDIT_COLUMNS}
       FROM refunds r LEFT JOIN audit_events a ON a.reference = r.id AND a.type = 'charge.refunded'
       WHERE r.id = ? AND r.merchant_id = ? AND r.status = 'succeeded' ORDER BY a.seq LIMIT 1`,
  )
    .bind(refundId, merchantId)
    .first<WithAudit<SucceededRefundRow>>();
  if (!row) return null;
  const audit = await auditOf(
    store,
    row,
    { type: "charge.refunded", by: { reference: refundId } },
    `refund ${refundId}`,
  );
  return sign(proofs, refundReceiptPayload(row, audit));
}
