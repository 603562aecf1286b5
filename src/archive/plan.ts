import { auditCreatedAt, firstRowFrom, lastSegment, liveAuditRows, type SegmentRecord } from "../audit/archiving";
import { latestCheckpoint } from "../audit/checkpoint-rows";
import { segmentKey } from "../audit/segment";
import { auditHeadSeq } from "../audit/service";
import { entryCountBetween, lastEntryBefore } from "../ledger/archiving";
import { genesisHashOf } from "../ledger/chain";
import type { Place } from "../ledger/place";

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
  const [previous, checkpoint, head] = await Promise.all([lastSegment(d1), latestCheckpoint(d1), auditHeadSeq(d1)]);
  if (previous && previous.status !== "done") return null;
  if (!checkpoint || head === null) return null;
  const firstSeq = previous ? previous.lastSeq + 1 : 1;
  let lastSeq = Math.min(checkpoint.seq, head - 1, firstSeq + MAX_SEGMENT_ROWS - 1);
  if (lastSeq < firstSeq) return null;
  // created_at is not monotonic in seq (plans are stamped before they queue): stop before the first young row.
  const young = await firstRowFrom(d1, firstSeq, lastSeq, cutoffIso);
  if (young !== null) lastSeq = young - 1;
  if (lastSeq < firstSeq) return null;

  const rows = await liveAuditRows(d1, firstSeq, lastSeq);
  if (rows.length !== lastSeq - firstSeq + 1 || rows[0]?.seq !== firstSeq)
    throw new Error(`archive: audit rows ${firstSeq}..${lastSeq} are not all in D1`);
  // The shard's chain starts from its own genesis.
  const prevHash = previous ? previous.lastHash : genesisHashOf(at.shard);
  if (rows[0]!.prevHash !== prevHash) throw new Error(`archive: row ${firstSeq} does not link to the last segment`);

  const next = await auditCreatedAt(d1, lastSeq + 1);
  const boundary = next !== null && next < cutoffIso ? next : cutoffIso;
  const afterEntryId = previous ? previous.lastEntryId : 0;
  const lastEntryId = await lastEntryBefore(d1, afterEntryId, boundary, MAX_SEGMENT_ENTRIES);
  const entries = await entryCountBetween(d1, afterEntryId, lastEntryId);

  const createdAts = rows.map((r) => r.createdAt).sort();
  return {
    firstSeq,
    lastSeq,
    prevHash,
    lastHash: rows[rows.length - 1]!.hash,
    afterEntryId,
    lastEntryId,
    rows: rows.length,
    entries,
    minCreatedAt: createdAts[0]!,
    maxCreatedAt: createdAts[createdAts.length - 1]!,
    // Each shard's segments have keys of their own: seqs repeat between shards.
    objectKey: segmentKey(firstSeq, lastSeq, at.shard),
    archivedAt,
  };
}
