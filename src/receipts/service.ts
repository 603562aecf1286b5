import { archivedReceiptRow, type HistoryStore } from "../audit/archived";
import type { Env } from "../config/env";
import { executeBatch, sqlStatement, type SqlStatement } from "../db/statements";
import { placementOf } from "../ledger/place";
import { canonicalJson } from "../lib/canonical-json";
import { paidPayoutRow } from "../payouts/reads";
import { signJws } from "../proofs/keys";
import { succeededRefundRow } from "../refunds/reads";
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

type AuditBy = { chargeId: string } | { reference: string };

/** The first audit row of `type` for a charge or a reference, with the columns WithAudit names. */
const auditRowOf = (type: string, by: AuditBy): SqlStatement =>
  "chargeId" in by
    ? sqlStatement(
        "SELECT seq, hash, data, created_at AS auditAt FROM audit_events WHERE charge_id = ? AND type = ? ORDER BY seq LIMIT 1",
        by.chargeId,
        type,
      )
    : sqlStatement(
        "SELECT seq, hash, data, created_at AS auditAt FROM audit_events WHERE reference = ? AND type = ? ORDER BY seq LIMIT 1",
        by.reference,
        type,
      );

/**
 * A completed row (its owner's statement) and the audit row of `type` beside it, read in one batch:
 * one transaction, so the same snapshot a join would read. Null when there is no such row; the
 * audit columns are null when the audit row is not in D1 (auditOf then looks in the archive).
 */
async function rowWithAudit<T>(store: HistoryStore, row: SqlStatement, type: string, by: AuditBy) {
  const [rows, audits] = await executeBatch(store.DB, [row, auditRowOf(type, by)]);
  const found = rows!.results[0] as T | undefined;
  if (!found) return null;
  const audit = audits!.results[0] as { seq: number; hash: string; data: string; auditAt: string } | undefined;
  const joined: WithAudit<T> = {
    ...found,
    seq: audit?.seq ?? null,
    hash: audit?.hash ?? null,
    data: audit?.data ?? null,
    auditAt: audit?.auditAt ?? null,
  };
  return joined;
}

/**
 * The audit row's part of a joined row, or of the archived row once it left D1 (src/archive/); a
 * completed row without one is a broken invariant, not a 404.
 */
async function auditOf(
  store: HistoryStore,
  row: WithAudit<unknown>,
  archived: { type: string; by: AuditBy },
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
  const row = await store.DB.prepare(
    `SELECT c.id, c.merchant_id AS merchantId, c.agent_id AS agentId, c.amount_minor AS amountMinor, c.currency,
       c.method, c.reference, c.paid_at AS paidAt, ${AUDIT_COLUMNS}
       FROM charges c LEFT JOIN audit_events a ON a.charge_id = c.id AND a.type = 'charge.paid'
       WHERE c.id = ? AND c.status = 'paid' ORDER BY a.seq LIMIT 1`,
  )
    .bind(chargeId)
    .first<WithAudit<PaidChargeRow>>();
  if (!row) return null;
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
  const row = await rowWithAudit<PaidPayoutRow>(store, paidPayoutRow(payoutId, merchantId), "payout.paid", {
    reference: payoutId,
  });
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
  const row = await rowWithAudit<SucceededRefundRow>(
    store,
    succeededRefundRow(refundId, merchantId),
    "charge.refunded",
    { reference: refundId },
  );
  if (!row) return null;
  const audit = await auditOf(
    store,
    row,
    { type: "charge.refunded", by: { reference: refundId } },
    `refund ${refundId}`,
  );
  return sign(proofs, refundReceiptPayload(row, audit));
}
