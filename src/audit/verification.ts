import type { Env } from "../config/env";
import type { ProofSettings } from "../config/proofs";
import { type AuditRow, type ChainVerdict, genesisHashOf, verifyChain } from "../ledger/chain";
import { type Place, placementOf } from "../ledger/place";
import { shardEntry } from "../ledger/shard-labels";
import type { HistoryStore } from "./archived";
import { auditHeadSeq, auditRows } from "./service";
import {
  ANCHORS_NOT_CHECKED,
  CheckpointCheck,
  type CheckpointsReport,
  type StoredCheckpointProblemKind,
} from "./stored-checkpoints";
import {
  type ChainProblem,
  type FullPass,
  pointProblem,
  type RememberedPoint,
  remember,
  rememberedPoint,
  rememberFullPass,
} from "./verification-point";

export { VERIFICATION_TYP } from "./verification-point";

/*
 * Verifying the audit chain at a cost that does not grow with its history. A verification that
 * holds remembers the row it reached (audit_verifications, ./verification-point.ts); the next one
 * re-hashes only the rows after that point, once it has read the point's own row back and found it
 * still the row verified (its hash as remembered, and recomputing). Rows after the point are then
 * checked as ever; a row before it edited in place is seen only by a full verification (`full`, from
 * genesis), which the signed checkpoints and their anchors back (src/audit/checkpoints-verify.ts).
 *
 * Each step re-hashes at most a chunk of rows (AUDIT_VERIFY_CHUNK) and remembers the row it reached,
 * so no request or cron run re-hashes an unbounded history: a long one is verified over several
 * steps (the cron's audit_verify job, or the next requests), each continuing where the last stopped.
 * A full pass keeps how far it got beside the point, and is carried on the same way.
 *
 * An attacker who can write D1 cannot move the point forward past rows they changed: the point is
 * signed with the receipt key, which D1 does not hold, and a point that does not verify is ignored
 * (the verification starts from genesis). Removing the point only makes the next verification full.
 */

/**
 * The most rows one step re-hashes. Re-hashing costs about 10 µs of CPU a row (the row's JSON
 * parsed, its canonical content written and hashed; measured on 20,000 payment rows), and a step
 * reads them from D1 1,000 to a query: 5,000 rows are about 50-100 ms of CPU and a dozen D1 queries,
 * small beside a request's CPU limit, while a history of a million rows still takes 200 steps.
 */
export const AUDIT_VERIFY_CHUNK = 5_000;

/** Where a step stopped before the chain's end: through `throughSeq` of `lastSeq`, the rest left to the next. */
export interface VerifyProgress {
  throughSeq: number;
  lastSeq: number;
}

/**
 * The verdict of GET /console/audit/verify: the chain's (or, when it holds, the first stored checkpoint
 * that contradicts it, named by its seq), where re-hashing started, and the checkpoints checked.
 */
export type AuditVerdict = (
  | (Extract<ChainVerdict, { ok: true }> & { progress?: VerifyProgress })
  | { ok: false; rows: number; brokenSeq: number; problem: ChainProblem | StoredCheckpointProblemKind }
) & {
  /** Re-hashed from genesis because the caller asked for it. */
  full: boolean;
  /** The seq re-hashing continued after: 0 is genesis, else a point an earlier verification reached. */
  from: number;
  /** The rows re-hashed by this verification; `rows` counts from genesis either way. */
  checked: number;
  checkpoints: CheckpointsReport;
} & typeof ANCHORS_NOT_CHECKED;

/** The rows after `afterSeq`, each shown to the checkpoint check on its way to the chain check. */
async function* shownTo(check: CheckpointCheck, rows: AsyncIterable<AuditRow>): AsyncGenerator<AuditRow> {
  for await (const row of rows) {
    await check.row(row.seq, row.hash);
    yield row;
  }
}

/**
 * The first `limit` of `rows`; once they are read, `next` is the seq of the row that follows (null
 * at the chain's end). The source is closed after: an archived segment's stream is not left open.
 */
function firstOf(rows: AsyncGenerator<AuditRow>, limit: number) {
  const after = { next: null as number | null };
  async function* take(): AsyncGenerator<AuditRow> {
    try {
      for (let n = 0; n < limit; n++) {
        const row = await rows.next();
        if (row.done) return;
        yield row.value;
      }
      const more = await rows.next();
      after.next = more.done ? null : more.value.seq;
    } finally {
      await rows.return(undefined);
    }
  }
  return { rows: take(), after };
}

/**
 * The remembered row a step continues after: the point's, or with `full` the full pass's under way
 * (none: from genesis; with no point, a full pass is the point's own verification from genesis).
 */
const resumedFrom = (point: RememberedPoint | null, full: boolean): Pick<FullPass, "seq" | "hash"> | null =>
  full ? (point?.fullPass ?? null) : point;

/**
 * Verifies up to `chunk` rows (AUDIT_VERIFY_CHUNK) of shard `shard`'s chain (shard 0 without one) after
 * the remembered point (or from genesis, when there is none), or, with `full`, after where the full
 * pass under way stopped (from genesis when none is), archived segments included, against the stored
 * checkpoints from there on. When all holds it remembers the row it reached; a step that stopped
 * before the end says how far it got (`progress`). A failed verification remembers nothing and keeps
 * the point it started from, so it fails again until someone looks.
 */
export async function verifyAudit(
  store: HistoryStore,
  proofs: ProofSettings,
  options: { full?: boolean; now?: number; shard?: number; chunk?: number } = {},
): Promise<AuditVerdict> {
  const full = options.full ?? false;
  const shard = options.shard ?? 0;
  const genesis = genesisHashOf(shard);
  const point = await rememberedPoint(store.DB, proofs);
  const resumed = resumedFrom(point, full);
  const start = resumed ? { seq: resumed.seq, hash: resumed.hash } : { seq: 0, hash: genesis };
  // What the point says of the checkpoints holds whether or not the pass is full.
  const check = await CheckpointCheck.open(store.DB, proofs, shard, start.seq, [
    point?.checkpoint,
    full ? point?.fullPass?.checkpoint : null,
  ]);
  const done = { full, from: start.seq, ...ANCHORS_NOT_CHECKED };
  // The remembered row is named as broken: it is not the row that was verified.
  const broken = (at: { seq: number }, problem: ChainProblem, rows: number, checked: number): AuditVerdict => ({
    ok: false,
    rows,
    brokenSeq: at.seq,
    problem,
    checked,
    checkpoints: check.sofar,
    ...done,
  });

  // Continuing from a remembered row needs it to be the row verified (and a checkpoint there is compared
  // with it); a full pass from genesis checks the point's row after the rows.
  if (resumed) {
    const problem = await pointProblem(store, resumed, genesis);
    if (problem) return broken(resumed, problem, resumed.seq, 0);
    await check.row(resumed.seq, resumed.hash);
  }
  const chunk = Math.max(1, options.chunk ?? AUDIT_VERIFY_CHUNK);
  const read = firstOf(auditRows(store, { afterSeq: start.seq, pageSize: Math.min(chunk + 1, 1000) }), chunk);
  const chain = await verifyChain(shownTo(check, read.rows), start);
  const counts = { rows: start.seq + chain.rows, checked: chain.rows };
  // A broken chain stops the reading: the checkpoints after the broken row are not reached.
  if (!chain.ok) return { ...chain, ...counts, checkpoints: check.sofar, ...done };
  const next = read.after.next;
  // Stopped before the end: the checkpoints beyond are compared by the step that reaches them.
  const checkpoints = next === null ? await check.finish(chain.headSeq) : await check.pause();
  // A chain that holds but contradicts a checkpoint signed before: cut short, or rewritten with fresh hashes.
  const first = checkpoints.problems[0];
  if (first) return { ok: false, brokenSeq: first.seq, problem: first.kind, ...counts, checkpoints, ...done };
  if (next !== null) {
    const reached = { seq: chain.headSeq, hash: chain.headHash, checkpoint: check.lastSeen(null) };
    await rememberStep(store.DB, proofs, { point, full, from: start.seq, reached }, options.now ?? Date.now());
    const lastSeq = Math.max(next, (await auditHeadSeq(store.DB)) ?? 0);
    return { ...chain, ...counts, checkpoints, ...done, progress: { throughSeq: chain.headSeq, lastSeq } };
  }
  if (point && full) {
    // A chain rewritten whole with fresh hashes recomputes from genesis; the remembered row says otherwise.
    // The checkpoints spoke first: with none contradicted, the point is the first thing the rows contradict.
    const problem = await pointProblem(store, point, genesis);
    if (problem) return { ...broken(point, problem, counts.rows, chain.rows), checkpoints };
  }
  // A full pass that reached the end renews the point (`fromSeq` 0 says it was checked from genesis), and
  // so does one that saw a checkpoint signed since, for the next to find it still there.
  const latest = check.latest;
  const newCheckpoint =
    latest !== null && (latest.seq !== point?.checkpoint?.seq || latest.hash !== point.checkpoint.hash);
  if (chain.headSeq > 0 && (full || chain.headSeq !== point?.seq || newCheckpoint)) {
    // The full pass under way is kept beside the new point, until a full pass reaches the end.
    const fullPass = full ? null : (point?.fullPass ?? null);
    const fromSeq = full ? 0 : start.seq;
    const head = { seq: chain.headSeq, hash: chain.headHash, fromSeq, checkpoint: latest, fullPass };
    await remember(store.DB, proofs, head, options.now ?? Date.now());
  }
  return { ...chain, ...counts, checkpoints, ...done };
}

/**
 * Remembers the row a step that stopped before the end reached: the point moves there, or, for a full
 * pass continuing beside a point, the pass's progress does. With no point, a full pass is the point's
 * own verification from genesis, and both move together.
 */
async function rememberStep(
  d1: D1Database,
  proofs: ProofSettings,
  step: { point: RememberedPoint | null; full: boolean; from: number; reached: FullPass },
  now: number,
) {
  const { point, full, from, reached } = step;
  const checkpoint = reached.checkpoint ?? (full ? (point?.fullPass?.checkpoint ?? null) : (point?.checkpoint ?? null));
  const pass = { ...reached, checkpoint };
  if (full && point) return rememberFullPass(d1, proofs, point, pass);
  const fullPass = full ? pass : (point?.fullPass ?? null);
  await remember(d1, proofs, { seq: reached.seq, hash: reached.hash, fromSeq: from, checkpoint, fullPass }, now);
}

/** Whether a full pass is under way in this database: the cron carries it on once the point is at the head. */
export async function fullPassUnderWay(d1: D1Database, proofs: ProofSettings): Promise<boolean> {
  return (await rememberedPoint(d1, proofs))?.fullPass != null;
}

/** One shard's verdict, in an answer over more than one shard: its number names it. */
export type ShardVerdict = AuditVerdict & Pick<Place, "shard">;

/**
 * Verifies the chain of every place, each from its own genesis and its own remembered point (kept in
 * its own database), re-hashing at most `chunk` rows in all (split evenly between the shards). With
 * one shard the answer is control's verdict as it always was; with more, the top level is the first
 * broken shard's verdict, else the first one's still in progress, else control's (so `ok` is true only
 * when every shard's is, and `progress` is absent only when every shard reached its end), and `shards`
 * has each shard's, by number.
 */
export async function verifyEveryShard(
  env: Env,
  proofs: ProofSettings,
  options: { full?: boolean; now?: number; chunk?: number } = {},
): Promise<AuditVerdict & { shards?: ShardVerdict[] }> {
  const places = placementOf(env).each();
  const chunk = Math.max(1, Math.floor((options.chunk ?? AUDIT_VERIFY_CHUNK) / places.length));
  const verdicts = await Promise.all(
    places.map(async (at) => ({
      at,
      // The place's number picks its chain's genesis and is what its checkpoints sign.
      verdict: await verifyAudit({ DB: at.db, ARCHIVE: env.ARCHIVE }, proofs, { ...options, chunk, shard: at.shard }),
    })),
  );
  const pending = (v: AuditVerdict) => v.ok && v.progress !== undefined;
  const top = (verdicts.find((v) => !v.verdict.ok) ?? verdicts.find((v) => pending(v.verdict)) ?? verdicts[0]!).verdict;
  if (verdicts.length === 1) return top;
  return { ...top, shards: verdicts.map(({ at, verdict }) => ({ ...shardEntry(at), ...verdict })) };
}
