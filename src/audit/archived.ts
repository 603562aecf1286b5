import type { AuditRow } from "../ledger/chain";
import { textLines } from "../lib/lines";
import { parseSegment, type Segment, segmentRowsOf } from "./segment";

/*
 * The audit chain's history lives in two places: old rows in R2 segments (written by src/archive/),
 * the rest in D1. A segment is read from R2 once it is `verified` (its rows may still be in D1
 * while they are being deleted, and are then read once, from R2). Readers go through here.
 */

/** Where the audit chain is kept: D1 and the archive bucket (the Worker's env has both). */
export interface HistoryStore {
  DB: D1Database;
  ARCHIVE: R2Bucket;
}

export interface SegmentRef {
  firstSeq: number;
  lastSeq: number;
  objectKey: string;
}

const SEGMENT_REF = "SELECT first_seq AS firstSeq, last_seq AS lastSeq, object_key AS objectKey FROM archive_segments";
const READABLE = "status IN ('verified', 'done')";

/** The first readable segment with rows after `afterSeq` (and rows within the date range, if given). */
export function nextSegment(
  d1: D1Database,
  afterSeq: number,
  range?: { fromIso: string; toIso: string },
): Promise<SegmentRef | null> {
  if (!range)
    return d1
      .prepare(`${SEGMENT_REF} WHERE ${READABLE} AND last_seq > ? ORDER BY first_seq LIMIT 1`)
      .bind(afterSeq)
      .first<SegmentRef>();
  return d1
    .prepare(
      `${SEGMENT_REF} WHERE ${READABLE} AND last_seq > ? AND max_created_at >= ? AND min_created_at < ?
       ORDER BY first_seq LIMIT 1`,
    )
    .bind(afterSeq, range.fromIso, range.toIso)
    .first<SegmentRef>();
}

/** A segment's object, parsed; a readable segment whose object is gone is lost history: it throws. */
export async function readSegment(bucket: R2Bucket, key: string): Promise<Segment> {
  const object = await bucket.get(key);
  if (!object) throw new Error(`archive object ${key} is missing`);
  return parseSegment(await object.text());
}

/** A readable segment's audit rows, streamed from its object; one whose object is gone throws. */
export async function* segmentRows(bucket: R2Bucket, key: string): AsyncGenerator<AuditRow> {
  const object = await bucket.get(key);
  if (!object) throw new Error(`archive object ${key} is missing`);
  yield* segmentRowsOf(textLines(object.body));
}

/** The archived audit row `seq`, or null when no readable segment holds it. */
export async function archivedAuditRow(store: HistoryStore, seq: number): Promise<AuditRow | null> {
  const ref = await store.DB.prepare(`${SEGMENT_REF} WHERE ${READABLE} AND first_seq <= ? AND last_seq >= ?`)
    .bind(seq, seq)
    .first<SegmentRef>();
  if (!ref) return null;
  const segment = await readSegment(store.ARCHIVE, ref.objectKey);
  return segment.rows[seq - ref.firstSeq] ?? null;
}

/**
 * The archived row of a receipt: the first row of `type` with this charge id, or with this
 * reference (a payout or refund id). Null when none was archived.
 */
export async function archivedReceiptRow(
  store: HistoryStore,
  type: string,
  by: { chargeId: string } | { reference: string },
): Promise<AuditRow | null> {
  const column = "chargeId" in by ? "charge_id" : "reference";
  const ref = await store.DB.prepare(
    `SELECT seq FROM archived_audit_refs WHERE type = ? AND ${column} = ? ORDER BY seq LIMIT 1`,
  )
    .bind(type, "chargeId" in by ? by.chargeId : by.reference)
    .first<{ seq: number }>();
  return ref ? archivedAuditRow(store, ref.seq) : null;
}
