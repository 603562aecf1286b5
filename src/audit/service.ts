import { and, asc, gt, gte, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { auditEvents } from "../db/schema";
import type { AuditRow } from "./chain";

type AuditRecord = typeof auditEvents.$inferSelect;

/** A stored row in the shape the chain hashes (its `data` parsed back from canonical JSON). */
export const auditRowOf = (r: AuditRecord): AuditRow => ({
  seq: r.seq,
  type: r.type,
  reference: r.reference,
  chargeId: r.chargeId,
  agentId: r.agentId,
  merchantId: r.merchantId,
  amountMinor: r.amountMinor,
  currency: r.currency,
  data: JSON.parse(r.data) as Record<string, unknown>,
  createdAt: r.createdAt,
  prevHash: r.prevHash,
  hash: r.hash,
});

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

/** Iterates over the whole chain (or a date range) in pages, so memory stays flat. */
export async function* auditRows(
  db: Db,
  range?: { fromIso: string; toIso: string },
  pageSize = 500,
): AsyncGenerator<AuditRow> {
  let after = 0;
  for (;;) {
    const page = await auditPage(db, after, pageSize, range);
    for (const record of page) yield auditRowOf(record);
    if (page.length < pageSize) return;
    after = page[page.length - 1]!.seq;
  }
}

export const auditHead = (db: Db) =>
  db
    .select({ seq: auditEvents.seq, hash: auditEvents.hash })
    .from(auditEvents)
    .orderBy(sql`${auditEvents.seq} DESC`)
    .limit(1)
    .get();
