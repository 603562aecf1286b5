import type { auditEvents } from "../db/schema";
import { type HistoryStore, nextSegment, segmentRows } from "./archived";
import { type AuditRow, auditRow } from "../ledger/chain";

/** An audit row as stored: `data` is canonical JSON text. */
export type AuditRecord = typeof auditEvents.$inferSelect;

/** A stored row in the shape the chain hashes (its `data` parsed back from canonical JSON). */
export const auditRowOf = (r: AuditRecord): AuditRow => auditRow(r, JSON.parse(r.data) as Record<string, unknown>);

/** Every column of an audit row, named as its stored record (AuditRecord) names them. */
export const AUDIT_COLUMNS = `seq, type, reference, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId,
  amount_minor AS amountMinor, currency, data, created_at AS createdAt, prev_hash AS prevHash, hash`;

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
