import {
  liveAuditRows,
  markSegment,
  recordPlan,
  type SegmentRecord,
  segmentAt,
  unfinishedSegment,
} from "../audit/archiving";
import {
  ARCHIVE_SEGMENT_TYP,
  parseSegment,
  segmentBody,
  segmentClaims,
  segmentProblem,
  segmentText,
} from "../audit/segment";
import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { liveLedgerEntries } from "../ledger/archiving";
import { type Place, placementOf } from "../ledger/place";
import { shardField } from "../ledger/shard-labels";
import { sha256Hex } from "../lib/crypto";
import { faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";
import { publishedJwks, signJws } from "../proofs/keys";
import { deleteArchivedRows } from "./delete";
import { planNextSegment } from "./plan";

/*
 * History archived to R2: audit rows and ledger entries older than ARCHIVE_AFTER_DAYS, covered by
 * a signed checkpoint, move to immutable, hash-linked, signed NDJSON segments (src/audit/segment.ts).
 * A segment goes through steps recorded in D1 (archive_segments), each safe to crash after:
 *   planned   bounds fixed in D1, so a resumed run writes the same segment
 *   (write)   the object put under its deterministic key, unless one is already there
 *   verified  the object read back: its hash, counts, bounds, chain and signature, and its body
 *             equal to the D1 rows; from now on readers take these rows from R2
 *   (delete)  the rows deleted from D1 in bounded batches, carried totals kept in the same batches
 *   done      nothing of the segment is left in D1
 * Readers (src/audit/archived.ts) never see a row twice or miss one at any of these points.
 */

/**
 * One step's worst case (a segment planned, written and verified, or its deletes begun): D1 the
 * unfinished segment, the plan's reads, record and read back (about 8), the segment's rows and entries
 * (2) and its mark (1); subrequests R2's head, put and get (3). Deletes ask for each batch themselves.
 */
const ARCHIVE_STEP_COST = { d1Queries: 12, subrequests: 3 } as const;

/** Time one cron run spends at most: the cron fires every minute and the next run resumes. */
export const ARCHIVE_BUDGET_MS = 20_000;

export interface ArchiveRun {
  /** Segments this run finished (now `done`). */
  segments: number;
  /** Whether a segment is left half-way (the time budget ran out); the next run resumes it. */
  unfinished: boolean;
}

/**
 * Archives what is due, within the time budget, in every place (or `at` alone). `now` stands for the
 * clock (tests archive "in the future"); `deleteBatch` is the rows of each kind one delete batch takes
 * (tests make it small).
 */
export async function archiveHistory(
  env: Env,
  options: { now?: number; budgetMs?: number; deleteBatch?: number; at?: Place } = {},
): Promise<ArchiveRun> {
  const deadline = Date.now() + (options.budgetMs ?? ARCHIVE_BUDGET_MS);
  const places = options.at === undefined ? placementOf(env).each() : [options.at];
  const run: ArchiveRun = { segments: 0, unfinished: false };
  // One shard after another within the one budget: what a shard leaves, the next run resumes.
  for (const at of places) {
    const one = await archiveShard(env, at, deadline, options);
    run.segments += one.segments;
    run.unfinished ||= one.unfinished;
  }
  return run;
}

/** Archives the history of the place `at`: its segments are listed in its database. */
async function archiveShard(
  env: Env,
  at: Place,
  deadline: number,
  options: { now?: number; deleteBatch?: number },
): Promise<ArchiveRun> {
  const now = options.now ?? Date.now();
  const cutoffIso = nowIso(now - settingsOf(env).archiveAfterMs);
  const db = at.db;
  // The logs name the shard (control's name none, as before shards).
  const tag = shardField(at.shard);
  let segments = 0;
  while (Date.now() < deadline) {
    // What is left is resumed by the next run from the segment's recorded step.
    if (!roomFor(ARCHIVE_STEP_COST, "audit_archive", tag)) return { segments, unfinished: true };
    let segment = await unfinishedSegment(db);
    if (!segment) {
      const planned = await planNextSegment(at, cutoffIso, nowIso(now));
      if (!planned) return { segments, unfinished: false };
      await recordPlan(db, planned);
      // A concurrent run may have planned it first: go on with what D1 holds.
      segment = await segmentAt(db, planned.firstSeq);
      if (!segment) continue;
    }
    if (segment.status === "planned") {
      await writeAndVerify(env, db, segment);
      continue;
    }
    if (segment.status === "verified") {
      if (!(await deleteArchivedRows(db, segment, deadline, options.deleteBatch)))
        return { segments, unfinished: true };
      await markSegment(db, segment.firstSeq, "verified", "done", nowIso());
      segments++;
      log.info("archive_segment", {
        ...tag,
        firstSeq: segment.firstSeq,
        lastSeq: segment.lastSeq,
        key: segment.objectKey,
      });
    }
  }
  return { segments, unfinished: (await unfinishedSegment(db)) !== null };
}

/**
 * Steps write and verify of a planned segment. The object is built from the rows still in D1 (none
 * is deleted before `verified`); an object already at the key (a run that crashed after writing)
 * is verified as it is and never overwritten, so a key only ever holds one segment.
 */
async function writeAndVerify(env: Env, db: D1Database, s: SegmentRecord): Promise<void> {
  const proofs = settingsOf(env).proofs;
  const rows = await liveAuditRows(db, s.firstSeq, s.lastSeq);
  const entries = await liveLedgerEntries(db, s.afterEntryId, s.lastEntryId);
  if (rows.length !== s.rows || entries.length !== s.entries)
    throw new Error(
      `archive: segment ${s.firstSeq} has ${rows.length} rows and ${entries.length} entries in D1, planned ${s.rows} and ${s.entries}`,
    );
  const existing = await env.ARCHIVE.head(s.objectKey);
  if (!existing) {
    const { claims, body } = await segmentClaims(s, rows, entries, s.archivedAt);
    const text = segmentText(claims, await signJws(proofs, ARCHIVE_SEGMENT_TYP, { ...claims }), body);
    // R2 checks the bytes it stores against this hash, and refuses the put if an object appeared meanwhile.
    await env.ARCHIVE.put(s.objectKey, text, {
      sha256: await sha256Hex(text),
      onlyIf: new Headers({ "if-none-match": "*" }),
      httpMetadata: { contentType: "application/x-ndjson" },
      customMetadata: { firstSeq: String(s.firstSeq), lastSeq: String(s.lastSeq) },
    });
  }
  faultPoint("archive.after_write");

  const object = await env.ARCHIVE.get(s.objectKey);
  if (!object) throw new Error(`archive: segment ${s.objectKey} is not in R2 after writing it`);
  const text = await object.text();
  const problem = await segmentProblem(text, s, await publishedJwks(proofs));
  if (problem) throw new Error(`archive: segment ${s.objectKey} does not verify: ${problem}`);
  // The object holds exactly the D1 rows: its body is byte for byte the one they make.
  if ((await sha256Hex(segmentBody(rows, entries))) !== parseSegment(text).header.bodySha256)
    throw new Error(`archive: segment ${s.objectKey} differs from the rows in D1`);
  await markSegment(db, s.firstSeq, "planned", "verified", nowIso(), await sha256Hex(text));
  faultPoint("archive.after_verify");
}
