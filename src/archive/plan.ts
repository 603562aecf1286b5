import { genesisHashOf } from "../ledger/chain";
import { segmentKey } from "../audit/segment";
import { latestCheckpoint } from "../audit/checkpoint-rows";
import type { Place } from "../ledger/place";
import { lastSegment, liveAuditRows, type SegmentRecord } from "./segments";

/** The most audit rows, and ledger entries, one segment holds: an object of a few hundred kB at most. */
export const MAX_SEGMENT_ROWS = 1000;
export const MAX_SEGMENT_ENTRIES = 4000;

/**
 * The bounds of the next segment of the place `at`'s history, or null when nothing is ready. Its audit rows follow the last
 * segment's, gap-free, and are all older than `cutoffIso`, covered by a signed checkpoint, and
 * before the chain's head (the sequencer reads the head from D1: it is never archived). Its ledger
 * entries follow the last segment's by id, up to the first entry made at or after the row after
 * the segment (or the cutoff), so entries travel with the audit rows of the same moments.
 */
export async function planNextSegment(
  at: Place,
  cutoffIso: string,
  archivedAt: string,
): Promise<Omit<SegmentRecord, "objectSha256" | "status"> | null> {
  const d1 = at.db;
  const [previous, checkpoint, head] = await Promise.all([
    lastSegment(d1),
    latestCheckpoint(d1),
    d1.prepare("SELECT MAX(seq) AS seq FROM audit_events").first<{ seq: number | null }>(),
  ]);
  if (previous && previous.status !== "done") return null;
  if (!checkpoint || head?.seq == null) return null;
  const firstSeq = previous ? previous.lastSeq + 1 : 1;
  let lastSeq = Math.min(checkpoint.seq, head.seq - 1, firstSeq + MAX_SEGMENT_ROWS - 1);
  if (lastSeq < firstSeq) return null;
  // created_at is not monotonic in seq (plans are stamped before they queue): stop before the first young row.
  // `+created_at` keeps SQLite on the seq range (at most MAX_SEGMENT_ROWS rows), off the created_at index.
  const young = await d1
    .prepare("SELECT MIN(seq) AS seq FROM audit_events WHERE seq BETWEEN ? AND ? AND +created_at >= ?")
    .bind(firstSeq, lastSeq, cutoffIso)
    .first<{ seq: number | null }>();
  if (young?.seq != null) lastSeq = young.seq - 1;
  if (lastSeq < firstSeq) return null;

  const rows = await liveAuditRows(d1, firstSeq, lastSeq);
  if (rows.length !== lastSeq - firstSeq + 1 || rows[0]?.seq !== firstSeq)
    throw new Error(`archive: audit rows ${firstSeq}..${lastSeq} are not all in D1`);
  // The shard's chain starts from its own genesis.
  const prevHash = previous ? previous.lastHash : genesisHashOf(at.shard);
  if (rows[0]!.prevHash !== prevHash) throw new Error(`archive: row ${firstSeq} does not link to the last segment`);

  const next = await d1
    .prepare("SELECT created_at AS createdAt FROM audit_events WHERE seq = ?")
    .bind(lastSeq + 1)
    .first<{ createdAt: string }>();
  const boundary = next && next.createdAt < cutoffIso ? next.createdAt : cutoffIso;
  const afterEntryId = previous ? previous.lastEntryId : 0;
  const lastEntryId = await lastEntryBefore(d1, afterEntryId, boundary);
  const counted = await d1
    .prepare("SELECT COUNT(*) AS n FROM ledger_entries WHERE id > ? AND id <= ?")
    .bind(afterEntryId, lastEntryId)
    .first<{ n: number }>();

  const createdAts = rows.map((r) => r.createdAt).sort();
  return {
    firstSeq,
    lastSeq,
    prevHash,
    lastHash: rows[rows.length - 1]!.hash,
    afterEntryId,
    lastEntryId,
    rows: rows.length,
    entries: counted?.n ?? 0,
    minCreatedAt: createdAts[0]!,
    maxCreatedAt: createdAts[createdAts.length - 1]!,
    // Each shard's segments have keys of their own: seqs repeat between shards.
    objectKey: segmentKey(firstSeq, lastSeq, at.shard),
    archivedAt,
  };
}

/**
 * The id of the last ledger entry of the next segment: entries after `afterEntryId` (at most
 * MAX_SEGMENT_ENTRIES of ids), up to the first made at or after `boundary`. Ids are handed out in
 * commit order, so no entry can later appear at or below the id this returns.
 */
async function lastEntryBefore(d1: D1Database, afterEntryId: number, boundary: string): Promise<number> {
  const row = await d1
    .prepare(
      `WITH w AS (SELECT MIN(id) AS lo FROM ledger_entries WHERE id > ?1)
       SELECT COALESCE(
         (SELECT MIN(e.id) - 1 FROM ledger_entries e, w WHERE e.id >= w.lo AND e.id < w.lo + ?2 AND e.created_at >= ?3),
         (SELECT MAX(e.id) FROM ledger_entries e, w WHERE e.id >= w.lo AND e.id < w.lo + ?2),
         ?1) AS lastId`,
    )
    .bind(afterEntryId, MAX_SEGMENT_ENTRIES, boundary)
    .first<{ lastId: number }>();
  return Math.max(row?.lastId ?? afterEntryId, afterEntryId);
}
