import { and, asc, gt, gte, lt } from "drizzle-orm";
import { type Db, dbOf } from "../db/client";
import { auditEvents } from "../db/schema";
import { type HistoryStore, nextSegment, segmentRows } from "./archived";
import { type AuditRow, auditRow } from "../ledger/chain";

type AuditRecord = typeof auditEvents.$inferSelect;

/** A stored row in the shape the chain hashes (its `data` parsed back from canonical JSON). */
export const auditRowOf = (r: AuditRecord): AuditRow => auditRow(r, JSON.parse(r.data) as Record<string, unknown>);

/** Rows after `afterSeq`, in sequence order, optionally within [fromIso, toIso). */
export function auditPage(db: Db, afterSeq: number, limit: number, range?: { fromIso: string; toIso: string }) {
  const conditions = [gt(auditEvents.seq, afterSeq)];
  if (range) conditions.push(gte(auditEvents.createdAt, range.fromIso), lt(auditEvents.createdAt, range.toIso));
  return db
    .select()
    .from(auditEvents)
    .where(and(...conditions))
    .orderBy(asc(auditEvents.seq))
    .limit(limit)
    .all();
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
  const db = dbOf(store.DB);
  let after = options.afterSeq ?? 0;
  for (;;) {
    const segment = await nextSegment(store.DB, after, range);
    if (segment) {
      for await (const row of segmentRows(store.ARCHIVE, segment.objectKey))
        if (row.seq > after && (!range || (row.createdAt >= range.fromIso && row.createdAt < range.toIso))) yield row;
      after = segment.lastSeq;
      continue;
    }
    const page = await auditPage(db, after, pageSize, range);
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
