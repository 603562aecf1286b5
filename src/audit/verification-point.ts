import type { ProofSettings } from "../config/proofs";
import { type ChainVerdict, verifyChain } from "../ledger/chain";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { publishedJwks, signJws, verifyJws } from "../proofs/keys";
import type { HistoryStore } from "./archived";
import { firstAuditRows } from "./service";
import type { SeenCheckpoint } from "./stored-checkpoints";

/*
 * The point a verification continues from (audit_verifications, one row in each shard's database),
 * signed with the receipt key so that a D1 writer cannot move it past rows they changed
 * (./verification.ts says how it is used). A full pass under way (`full=true`, from genesis, in
 * bounded steps like any verification) keeps how far it got in the same JWS, beside the point.
 */

/** The JWS `typ` of a remembered verification. */
export const VERIFICATION_TYP = "agent-pay-audit-verification+jwt";

export type ChainProblem = Extract<ChainVerdict, { ok: false }>["problem"];

/** How far a full pass under way got: re-hashed from genesis through `seq`, whose hash is `hash`. */
export interface FullPass {
  seq: number;
  hash: string;
  /** The last checkpoint the pass compared with the rows (or the one it started having seen). */
  checkpoint: SeenCheckpoint | null;
}

export interface RememberedPoint {
  seq: number;
  hash: string;
  fromSeq: number;
  verifiedAt: string;
  /** The latest checkpoint stored when that verification started; in the JWS alone (none in points signed before). */
  checkpoint: SeenCheckpoint | null;
  /** A full pass under way, in the JWS alone; null when none is. */
  fullPass: FullPass | null;
}

/** The checkpoint a payload names, if it names one as it is written. */
function seenIn(value: unknown): SeenCheckpoint | null {
  const cp = value as Partial<SeenCheckpoint> | null | undefined;
  return typeof cp?.seq === "number" && typeof cp.hash === "string" ? { seq: cp.seq, hash: cp.hash } : null;
}

/** The full pass a payload names, if it names one as it is written. */
function fullPassIn(value: unknown): FullPass | null {
  const pass = value as Partial<FullPass> | null | undefined;
  if (typeof pass?.seq !== "number" || typeof pass.hash !== "string") return null;
  return { seq: pass.seq, hash: pass.hash, checkpoint: seenIn(pass.checkpoint) };
}

/** The remembered point, when its signature holds with the signing key of now; else null (start from genesis). */
export async function rememberedPoint(d1: D1Database, proofs: ProofSettings): Promise<RememberedPoint | null> {
  const row = await d1
    .prepare(
      "SELECT seq, hash, from_seq AS fromSeq, verified_at AS verifiedAt, jws FROM audit_verifications ORDER BY seq DESC LIMIT 1",
    )
    .first<Omit<RememberedPoint, "checkpoint" | "fullPass"> & { jws: string }>();
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
    return { ...point, checkpoint: seenIn(signed.payload.checkpoint), fullPass: fullPassIn(signed.payload.fullPass) };
  // After a key rotation this is expected once; otherwise someone wrote the row who should not have.
  log.warn("audit_verification_point_unsigned", { seq: row.seq, reason: signed.ok ? "fields differ" : signed.reason });
  return null;
}

/**
 * What is wrong with the remembered point's row now, if anything: checked as a full pass checks it
 * (linked to the row before, recomputing), and then its hash against the one remembered.
 */
export async function pointProblem(
  store: HistoryStore,
  point: Pick<RememberedPoint, "seq" | "hash">,
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

/** The signed payload of a point: its four columns, the checkpoint it saw, and the full pass under way (if any). */
const signPoint = (proofs: ProofSettings, { seq, hash, fromSeq, verifiedAt, checkpoint, fullPass }: RememberedPoint) =>
  signJws(proofs, VERIFICATION_TYP, { seq, hash, fromSeq, verifiedAt, checkpoint, ...(fullPass ? { fullPass } : {}) });

/** Remembers a verified point as the only one; concurrent verifications may leave either's, both true. */
export async function remember(
  d1: D1Database,
  proofs: ProofSettings,
  point: Omit<RememberedPoint, "verifiedAt">,
  now: number,
) {
  const verifiedAt = nowIso(now);
  const jws = await signPoint(proofs, { ...point, verifiedAt });
  await d1.batch([
    d1
      .prepare(
        `INSERT INTO audit_verifications (seq, hash, from_seq, verified_at, jws) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (seq) DO UPDATE SET hash = excluded.hash, from_seq = excluded.from_seq,
           verified_at = excluded.verified_at, jws = excluded.jws`,
      )
      .bind(point.seq, point.hash, point.fromSeq, verifiedAt, jws),
    d1.prepare("DELETE FROM audit_verifications WHERE seq != ?").bind(point.seq),
  ]);
}

/**
 * Keeps how far a full pass got beside the point, which stays as it is. Guarded by the point's own
 * columns: when another verification moved the point meanwhile, this step's progress is lost (the
 * next step of the pass re-hashes it), never the point.
 */
export async function rememberFullPass(d1: D1Database, proofs: ProofSettings, point: RememberedPoint, pass: FullPass) {
  const jws = await signPoint(proofs, { ...point, fullPass: pass });
  await d1
    .prepare("UPDATE audit_verifications SET jws = ? WHERE seq = ? AND hash = ? AND verified_at = ?")
    .bind(jws, point.seq, point.hash, point.verifiedAt)
    .run();
}
