import type { auditEvents } from "../db/schema";
import { type SqlStatement, sqlStatement } from "../db/statements";
import { type AuditRow, auditRow } from "../ledger/chain";
import { type HistoryStore, nextSegment, segmentRows } from "./archived";

/** An audit row as stored: `data` is canonical JSON text. */
export type AuditRecord = typeof auditEvents.$inferSelect;

/** A stored row in the shape the chain hashes (its `data` parsed back from canonical JSON). */
export const auditRowOf = (r: AuditRecord): AuditRow => auditRow(r, JSON.parse(r.data) as Record<string, unknown>);

/** Every column of an audit row, named as its stored record (AuditRecord) names them. */
export const AUDIT_COLUMNS = `seq, type, reference, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId,
  amount_minor AS amountMinor, amount_base_units AS amountBaseUnits, currency, data, created_at AS createdAt, prev_hash AS prevHash, hash`;

/** The audit row types a receipt names: a charge's payment, a payout's, a refund's. */
export type ReceiptRowType = "charge.paid" | "payout.paid" | "charge.refunded" | "agent.x402_payment.settled";

/**
 * The first row of `type` with this charge id, or with this reference (a payout or refund id), in
 * D1: none once archived (./archived.ts, archivedReceiptRow, finds it then). The type is written into
 * the SQL, not bound: that is what lets SQLite use the partial index of payout and refund rows.
 */
export function auditRowOfType(type: ReceiptRowType, by: { chargeId: string } | { reference: string }): SqlStatement {
  const [column, value] = "chargeId" in by ? ["charge_id", by.chargeId] : ["reference", by.reference];
  return sqlStatement(
    `SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE ${column} = ? AND type = '${type}' ORDER BY seq LIMIT 1`,
    value,
  );
}

/** Rows after `afterSeq`, in sequence order, optionally within [fromIso, toIso). */
export async function auditPage(
  db: D1Database,
  afterSeq: number,
  limit: number,
  range?: { fromIso: string; toIso: string },
): Promise<AuditRecord[]> {
  const read = range
    ? db
        .prepare(
          `SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE seq > ? AND created_at >= ? AND created_at < ?
           ORDER BY seq LIMIT ?`,
        )
        .bind(afterSeq, range.fromIso, range.toIso, limit)
    : db.prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`).bind(afterSeq, limit);
  return (await read.all<AuditRecord>()).results;
}

/**
 * Iterates over the chain after `afterSeq` (or a date range of it) in seq order, archived segments
 * from R2 first (streamed a row at a time), then D1 a page at a time, so memory stays flat. Before
 * each D1 page it looks for a segment again: rows archived while a long read runs are then taken
 * from R2, never skipped.
 */
export async function* auditRows(
  store: HistoryStore,
  options: { afterSeq?: number; range?: { fromIso: string; toIso: string }; pageSize?: number } = {},
): AsyncGenerator<AuditRow> {
  const { range, pageSize = 500 } = options;
  let after = options.afterSeq ?? 0;
  for (;;) {
    const segment = await nextSegment(store.DB, after, range);
    if (segment) {
      for await (const row of segmentRows(store.ARCHIVE, segment.objectKey))
        if (row.seq > after && (!range || (row.createdAt >= range.fromIso && row.createdAt < range.toIso))) yield row;
      after = segment.lastSeq;
      continue;
    }
    const page = await auditPage(store.DB, after, pageSize, range);
    for (const record of page) yield auditRowOf(record);
    if (page.length < pageSize) return;
    after = page[page.length - 1]!.seq;
  }
}

/** Up to `limit` rows after `afterSeq` (within a date range, if given), wherever they are kept. */
export async function firstAuditRows(
  store: HistoryStore,
  limit: number,
  options: { afterSeq?: number; range?: { fromIso: string; toIso: string } } = {},
): Promise<AuditRow[]> {
  const rows: AuditRow[] = [];
  if (limit <= 0) return rows;
  for await (const row of auditRows(store, { ...options, pageSize: Math.min(limit, 1000) })) {
    rows.push(row);
    if (rows.length === limit) break;
  }
  return rows;
}

/** The seq of the chain's head, null while it has no row. */
export async function auditHeadSeq(db: D1Database): Promise<number | null> {
  const head = await db.prepare("SELECT MAX(seq) AS seq FROM audit_events").first<{ seq: number | null }>();
  return head?.seq ?? null;
}

/**
 * The hashes of rows `fromSeq`..`toSeq`, in order; throws on a missing row. Rows still in D1, as
 * every new checkpoint's are, are read as their seq and hash alone; an older checkpoint's rows that
 * were archived are read through the whole history, segments included.
 */
export async function rowHashes(store: HistoryStore, fromSeq: number, toSeq: number): Promise<string[]> {
  const hashes = (await liveRowHashes(store.DB, fromSeq, toSeq)) ?? (await historyRowHashes(store, fromSeq, toSeq));
  if (hashes.length !== toSeq - fromSeq + 1) throw new Error(`audit chain has no row ${fromSeq + hashes.length}`);
  return hashes;
}

/** From D1 a page at a time; null when a row is not there (archived, or missing: the history tells). */
async function liveRowHashes(db: D1Database, fromSeq: number, toSeq: number): Promise<string[] | null> {
  const hashes: string[] = [];
  for (let from = fromSeq; from <= toSeq; from += 1000) {
    const page = await db
      .prepare("SELECT seq, hash FROM audit_events WHERE seq BETWEEN ? AND ? ORDER BY seq")
      .bind(from, Math.min(toSeq, from + 999))
      .all<{ seq: number; hash: string }>();
    for (const row of page.results) {
      if (row.seq !== fromSeq + hashes.length) return null;
      hashes.push(row.hash);
    }
  }
  return hashes.length === toSeq - fromSeq + 1 ? hashes : null;
}

async function historyRowHashes(store: HistoryStore, fromSeq: number, toSeq: number): Promise<string[]> {
  const hashes: string[] = [];
  for await (const row of auditRows(store, { afterSeq: fromSeq - 1, pageSize: 1000 })) {
    if (row.seq > toSeq || row.seq !== fromSeq + hashes.length) break;
    hashes.push(row.hash);
  }
  return hashes;
}
