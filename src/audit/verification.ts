import type { Env } from "../config/env";
import type { ProofSettings } from "../config/proofs";
import { type AuditRow, type ChainVerdict, genesisHashOf, verifyChain } from "../ledger/chain";
import { type Place, placementOf } from "../ledger/place";
import { shardEntry } from "../ledger/shard-labels";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { publishedJwks, signJws, verifyJws } from "../proofs/keys";
import type { HistoryStore } from "./archived";
import { auditRows, firstAuditRows } from "./service";
import {
  ANCHORS_NOT_CHECKED,
  CheckpointCheck,
  type CheckpointsReport,
  type SeenCheckpoint,
  type StoredCheckpointProblemKind,
} from "./stored-checkpoints";

/*
 * Verifying the audit chain at a cost that does not grow with its history. A verification that
 * succeeds remembers the head it reached (audit_verifications); the next one re-hashes only the rows
 * after that point, once it has read the point's own row back and found it still the row verified
 * (its hash as remembered, and recomputing). Rows after the point are then checked as ever; a row
 * before it edited in place is seen only by a full verification (`full`, from genesis), which the
 * signed checkpoints and their anchors back (src/audit/checkpoints-verify.ts).
 *
 * An attacker who can write D1 cannot move the point forward past rows they changed: the point is
 * signed with the receipt key, which D1 does not hold, and a point that does not verify is ignored
 * (the verification starts from genesis). Removing the point only makes the next verification full.
 */

/** The JWS `typ` of a remembered verification. */
export const VERIFICATION_TYP = "agent-pay-audit-verification+jwt";

type ChainProblem = Extract<ChainVerdict, { ok: false }>["problem"];

/**
 * The verdict of GET /console/audit/verify: the chain's (or, when it holds, the first stored checkpoint
 * that contradicts it, named by its seq), where re-hashing started, and the checkpoints checked.
 */
export type AuditVerdict = (
  | Extract<ChainVerdict, { ok: true }>
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

interface RememberedPoint {
  seq: number;
  hash: string;
  fromSeq: number;
  verifiedAt: string;
  /** The latest checkpoint stored when that verification started; in the JWS alone (none in points signed before). */
  checkpoint: SeenCheckpoint | null;
}

/** The checkpoint a point's payload names, if it names one as it is written. */
function seenIn(payload: Record<string, unknown>): SeenCheckpoint | null {
  const cp = payload.checkpoint as Partial<SeenCheckpoint> | null | undefined;
  return typeof cp?.seq === "number" && typeof cp.hash === "string" ? { seq: cp.seq, hash: cp.hash } : null;
}

/** The remembered point, when its signature holds with the signing key of now; else null (start from genesis). */
async function rememberedPoint(d1: D1Database, proofs: ProofSettings): Promise<RememberedPoint | null> {
  const row = await d1
    .prepare(
      "SELECT seq, hash, from_seq AS fromSeq, verified_at AS verifiedAt, jws FROM audit_verifications ORDER BY seq DESC LIMIT 1",
    )
    .first<Omit<RememberedPoint, "checkpoint"> & { jws: string }>();
  if (!row) return null;
  // The current key alone: a point signed by a key rotated out (perhaps because it leaked) is not trusted.
  const current = (await publishedJwks(proofs)).keys.slice(0, 1);
  const signed = await verifyJws(row.jws, { keys: current }, VERIFICATION_TYP);
  const { jws: _jws, ...point } = row;
  if (
    signed.ok &&
    signed.payload.seq === point.seq &&
    signed.payload.hash === point.hash &&
    signed.payload.fromSeq === point.fromSeq &&
    signed.payload.verifiedAt === point.verifiedAt
  )
    return { ...point, checkpoint: seenIn(signed.payload) };
  // After a key rotation this is expected once; otherwise someone wrote the row who should not have.
  log.warn("audit_verification_point_unsigned", { seq: row.seq, reason: signed.ok ? "fields differ" : signed.reason });
  return null;
}

/**
 * What is wrong with the remembered point's row now, if anything: checked as a full pass checks it
 * (linked to the row before, recomputing), and then its hash against the one remembered.
 */
async function pointProblem(
  store: HistoryStore,
  point: RememberedPoint,
  genesis: string,
): Promise<ChainProblem | null> {
  const rows = await firstAuditRows(store, 2, { afterSeq: Math.max(0, point.seq - 2) });
  const before = point.seq === 1 ? { seq: 0, hash: genesis } : rows.shift();
  const row = rows[0];
  if (!before || before.seq !== point.seq - 1 || !row || row.seq !== point.seq) return "seq_gap";
  const step = await verifyChain([row], before);
  if (!step.ok) return step.problem;
  return row.hash === point.hash ? null : "hash_mismatch";
}

/** Remembers a verified head as the only point; concurrent verifications may leave either's, both true. */
async function remember(
  d1: D1Database,
  proofs: ProofSettings,
  { seq, hash, fromSeq, checkpoint }: Omit<RememberedPoint, "verifiedAt">,
  now: number,
) {
  const verifiedAt = nowIso(now);
  const jws = await signJws(proofs, VERIFICATION_TYP, { seq, hash, fromSeq, verifiedAt, checkpoint });
  await d1.batch([
    d1
      .prepare(
        `INSERT INTO audit_verifications (seq, hash, from_seq, verified_at, jws) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (seq) DO UPDATE SET hash = excluded.hash, from_seq = excluded.from_seq,
           verified_at = excluded.verified_at, jws = excluded.jws`,
      )
      .bind(seq, hash, fromSeq, verifiedAt, jws),
    d1.prepare("DELETE FROM audit_verifications WHERE seq != ?").bind(seq),
  ]);
}

/** The rows after `afterSeq`, each shown to the checkpoint check on its way to the chain check. */
async function* shownTo(check: CheckpointCheck, rows: AsyncIterable<AuditRow>): AsyncGenerator<AuditRow> {
  for await (const row of rows) {
    await check.row(row.seq, row.hash);
    yield row;
  }
}

/**
 * Verifies shard `shard`'s chain (shard 0 without one) after the remembered point (or from genesis,
 * when there is none or `full` is asked), archived segments included, against the stored checkpoints
 * from the point on (every one when full), and remembers the head when all holds. A failed
 * verification remembers nothing and keeps the point it started from, so it fails again until
 * someone looks.
 */
export async function verifyAudit(
  store: HistoryStore,
  proofs: ProofSettings,
  options: { full?: boolean; now?: number; shard?: number } = {},
): Promise<AuditVerdict> {
  const full = options.full ?? false;
  const shard = options.shard ?? 0;
  const genesis = genesisHashOf(shard);
  const point = await rememberedPoint(store.DB, proofs);
  const start = point && !full ? { seq: point.seq, hash: point.hash } : { seq: 0, hash: genesis };
  // What the point says of the checkpoints holds whether or not the pass is full.
  const check = await CheckpointCheck.open(store.DB, proofs, shard, start.seq, point?.checkpoint);
  const done = { full, from: start.seq, ...ANCHORS_NOT_CHECKED };
  // The remembered row is named as broken: it is not the row that was verified.
  const broken = (at: RememberedPoint, problem: ChainProblem, rows: number, checked: number): AuditVerdict => ({
    ok: false,
    rows,
    brokenSeq: at.seq,
    problem,
    checked,
    checkpoints: check.sofar,
    ...done,
  });

  // Continuing from the point needs its row to be the one verified; a full pass checks it after the rows.
  if (point && !full) {
    const problem = await pointProblem(store, point, genesis);
    if (problem) return broken(point, problem, point.seq, 0);
    await check.row(point.seq, point.hash);
  }
  const rows = shownTo(check, auditRows(store, { afterSeq: start.seq, pageSize: 1000 }));
  const chain = await verifyChain(rows, start);
  const counts = { rows: start.seq + chain.rows, checked: chain.rows };
  // A broken chain stops the reading: the checkpoints after the broken row are not reached.
  if (!chain.ok) return { ...chain, ...counts, checkpoints: check.sofar, ...done };
  const checkpoints = await check.finish(chain.headSeq);
  // A chain that holds but contradicts a checkpoint signed before: cut short, or rewritten with fresh hashes.
  const first = checkpoints.problems[0];
  if (first) return { ok: false, brokenSeq: first.seq, problem: first.kind, ...counts, checkpoints, ...done };
  if (point && full) {
    // A chain rewritten whole with fresh hashes recomputes from genesis; the remembered row says otherwise.
    // The checkpoints spoke first: with none contradicted, the point is the first thing the rows contradict.
    const problem = await pointProblem(store, point, genesis);
    if (problem) return { ...broken(point, problem, counts.rows, chain.rows), checkpoints };
  }
  // A full pass that reached the point again renews it (`fromSeq` 0 says it was checked from genesis), and
  // so does one that saw a checkpoint signed since, for the next to find it still there.
  const latest = check.latest;
  const newCheckpoint =
    latest !== null && (latest.seq !== point?.checkpoint?.seq || latest.hash !== point.checkpoint.hash);
  if (chain.headSeq > 0 && (full || chain.headSeq !== point?.seq || newCheckpoint)) {
    const head = { seq: chain.headSeq, hash: chain.headHash, fromSeq: start.seq, checkpoint: latest };
    await remember(store.DB, proofs, head, options.now ?? Date.now());
  }
  return { ...chain, ...counts, checkpoints, ...done };
}

/** One shard's verdict, in an answer over more than one shard: its number names it. */
export type ShardVerdict = AuditVerdict & Pick<Place, "shard">;

/**
 * Verifies the chain of every place, each from its own genesis and its own remembered point (kept in
 * its own database). With one shard the answer is control's verdict as it always was; with more, the
 * top level is the first broken shard's verdict (control's when all hold, so `ok` is true only when
 * every shard's is) and `shards` has each shard's, by number.
 */
export async function verifyEveryShard(
  env: Env,
  proofs: ProofSettings,
  options: { full?: boolean; now?: number } = {},
): Promise<AuditVerdict & { shards?: ShardVerdict[] }> {
  const verdicts = await Promise.all(
    placementOf(env)
      .each()
      .map(async (at) => ({
        at,
        // The place's number picks its chain's genesis and is what its checkpoints sign.
        verdict: await verifyAudit({ DB: at.db, ARCHIVE: env.ARCHIVE }, proofs, { ...options, shard: at.shard }),
      })),
  );
  const top = (verdicts.find((v) => !v.verdict.ok) ?? verdicts[0]!).verdict;
  if (verdicts.length === 1) return top;
  return { ...top, shards: verdicts.map(({ at, verdict }) => ({ ...shardEntry(at), ...verdict })) };
}
