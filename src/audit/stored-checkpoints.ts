import type { ProofSettings } from "../config/proofs";
import { publishedJwks, verifyJws } from "../proofs/keys";
import { CHECKPOINT_TYP, type ListedCheckpoint, signsOtherFields } from "./checkpoints-verify";

/*
 * The audit chain checked against the signed checkpoints stored beside it, inside the service (GET
 * /console/audit/verify). A chain rewritten with fresh hashes, or cut short, holds on its own; a
 * checkpoint signed before names a head the rows no longer have, and D1 cannot forge one (the key
 * is not there). What D1 can do is delete checkpoints: only their anchors on chain, which
 * `audit verify` of the CLI reads with settings of its own (./checkpoints-verify.ts), see that.
 *
 * The checkpoints are read from audit_checkpoints here; src/checkpoints signs and anchors them through
 * ./checkpoint-rows.ts (the table is the audit chain's; signing and anchoring live apart).
 */

/** What a verification inside the service cannot check, said in every answer. */
export const ANCHORS_NOT_CHECKED = {
  anchorsChecked: false as const,
  note: "Re-hashes the rows and checks them against the signed checkpoints stored with them. The checkpoints' anchors on chain are not read here: `npm run --silent cli -- audit verify` reads them from the chain with settings of its own, and is what proves checkpoints were not deleted with the rows.",
};

export type StoredCheckpointProblemKind =
  /** The JWS does not verify with the service's keys, or signs other fields than stored. */
  | "signature_invalid"
  /** The rows end before the checkpoint's head (rows removed from the end), or have another hash there (rewritten). */
  | "checkpoint_contradicts_rows"
  /**
   * The checkpoint does not start where the one before it ends (a checkpoint between them was removed),
   * or it is the latest a verification saw, since removed or stored with another head.
   */
  | "checkpoint_missing";

export interface StoredCheckpointProblem {
  kind: StoredCheckpointProblemKind;
  seq: number;
  detail: string;
}

export interface CheckpointsReport {
  /** Checkpoints compared with the rows by this verification. */
  checked: number;
  /** How many of them failed; `problems` lists the first ten problems. */
  failed: number;
  /** The latest checkpoint stored when the verification started, whether checked now or not; null before the first. */
  latestSeq: number | null;
  problems: StoredCheckpointProblem[];
}

/** A checkpoint's seq and head: the latest stored when a verification started, remembered with its point. */
export interface SeenCheckpoint {
  seq: number;
  hash: string;
}

/** A stored checkpoint: a listed one without its anchor's transaction, which this check never reads. */
type Stored = Omit<ListedCheckpoint, "transaction">;

const SELECT = `SELECT seq, hash, from_seq AS fromSeq, rows_root AS rowsRoot, signed_at AS signedAt, jws
  FROM audit_checkpoints`;
const PAGE = 200;
const MAX_PROBLEMS = 10;
const short = (hash: string) => `${hash.slice(0, 12)}…`;
const rewritten = (cp: Stored, hash: string) =>
  hash === cp.hash ? null : `row ${cp.seq} has hash ${short(hash)}, not ${short(cp.hash)}: the chain was rewritten`;

/**
 * Compares the stored checkpoints from seq `fromSeq` on with the rows as a verification streams
 * them: `row` with each row's seq and hash in order, then `finish` at the head, where the checkpoints
 * not reached name a head beyond it. Memory stays flat: the checkpoints are read a page at a time.
 */
export class CheckpointCheck {
  private page: Stored[] = [];
  private readAfter: number;
  private exhausted = false;
  private readonly report: CheckpointsReport;
  /** The last checkpoint compared with the rows, as stored: what a verification that stops early saw last. */
  private compared: SeenCheckpoint | null = null;

  private constructor(
    private readonly db: D1Database,
    private readonly jwks: Awaited<ReturnType<typeof publishedJwks>>,
    private readonly shard: number,
    private readonly fromSeq: number,
    /** The seq the checkpoint before the next one ends at (0: none). */
    private previous: number,
    /** The latest checkpoint stored now (at `open`), null before the first. */
    readonly latest: SeenCheckpoint | null,
    /** Checkpoints earlier verifications saw (the latest stored when each started): still stored as seen. */
    private readonly seen: SeenCheckpoint[],
  ) {
    const latestSeq = latest?.seq ?? null;
    this.readAfter = fromSeq - 1;
    this.exhausted = latestSeq === null;
    this.report = { checked: 0, failed: 0, latestSeq, problems: [] };
  }

  /**
   * Checks the checkpoints with seq ≥ `fromSeq` (every one from 0) of shard `shard`, whose database `db`
   * is, and that each of `seen` (the latest at a verification remembered, if known) is still stored as it was.
   */
  static async open(
    db: D1Database,
    proofs: ProofSettings,
    shard: number,
    fromSeq: number,
    seen: (SeenCheckpoint | null | undefined)[] = [],
  ) {
    const [before, latest, jwks] = await Promise.all([
      db
        .prepare("SELECT MAX(seq) AS seq FROM audit_checkpoints WHERE seq < ?")
        .bind(fromSeq)
        .first<{ seq: number | null }>(),
      db.prepare("SELECT seq, hash FROM audit_checkpoints ORDER BY seq DESC LIMIT 1").first<SeenCheckpoint>(),
      // Every published key: a checkpoint keeps the key it was signed with, rotated out or not.
      publishedJwks(proofs),
    ]);
    // Each once: a point and the full pass under way may have seen the same one.
    const known = [
      ...new Map(seen.filter((s): s is SeenCheckpoint => !!s).map((s) => [`${s.seq}:${s.hash}`, s])).values(),
    ];
    return new CheckpointCheck(db, jwks, shard, fromSeq, before?.seq ?? 0, latest, known);
  }

  /** The report so far: what a verification that stopped early (a broken chain) has checked. */
  get sofar(): CheckpointsReport {
    return { ...this.report, problems: [...this.report.problems] };
  }

  /** The last checkpoint compared with the rows so far, else `fallback`: what a point reached now has seen. */
  lastSeen(fallback: SeenCheckpoint | null): SeenCheckpoint | null {
    return this.compared ?? fallback;
  }

  /** The next row of the chain: the checkpoints up to its seq are compared with it. */
  async row(seq: number, hash: string): Promise<void> {
    for (let cp = await this.peek(); cp && cp.seq <= seq; cp = await this.peek()) {
      this.page.shift();
      await this.check(cp, cp.seq === seq ? rewritten(cp, hash) : `no row at seq ${cp.seq}`);
    }
  }

  /** The rows ended at `headSeq`: every checkpoint left names a head they no longer have. */
  async finish(headSeq: number): Promise<CheckpointsReport> {
    const cut = `the rows end at seq ${headSeq}: rows removed from the end`;
    for (let cp = await this.peek(); cp; cp = await this.peek()) {
      this.page.shift();
      await this.check(cp, cut);
    }
    return this.pause();
  }

  /**
   * The rows stop here for now (a bounded step, continued by the next from where it stopped): the
   * checkpoints beyond are compared when a step reaches them, and those seen before must still be stored.
   */
  async pause(): Promise<CheckpointsReport> {
    for (const seen of this.seen) await this.recall(seen);
    return this.sofar;
  }

  /**
   * Checkpoints are never removed, and one before `fromSeq` is not read: the latest a verification saw
   * must still be stored with its head. A table swapped for another shard's, or its recent checkpoints
   * deleted, would otherwise hold from the point on (none reaches past it).
   */
  private async recall(seen: SeenCheckpoint) {
    const now = await this.db
      .prepare("SELECT hash FROM audit_checkpoints WHERE seq = ?")
      .bind(seen.seq)
      .first<{ hash: string }>();
    // One at `fromSeq` or after was compared with the rows just now.
    if (now && (now.hash === seen.hash || seen.seq >= this.fromSeq)) return;
    const detail = now
      ? `has head ${short(now.hash)}, but the last verification saw it with ${short(seen.hash)}`
      : `is gone, but the last verification saw it (the latest stored is ${this.report.latestSeq ?? "none"})`;
    this.report.failed++;
    const problems = this.report.problems;
    problems.push({ kind: "checkpoint_missing", seq: seen.seq, detail: `the checkpoint at seq ${seen.seq} ${detail}` });
    // The verdict names the first problem by seq.
    problems.sort((a, b) => a.seq - b.seq);
    problems.splice(MAX_PROBLEMS);
  }

  /**
   * The next checkpoint, up to the latest there was at `open`: one signed since covers rows appended
   * after the verification may have read its last page, and is not beyond the rows it read.
   */
  private async peek(): Promise<Stored | undefined> {
    if (this.page.length === 0 && !this.exhausted) {
      const rows = await this.db
        .prepare(`${SELECT} WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`)
        .bind(this.readAfter, this.report.latestSeq, PAGE)
        .all<Stored>();
      this.page = rows.results;
      this.exhausted = rows.results.length < PAGE;
      if (this.page.length > 0) this.readAfter = this.page[this.page.length - 1]!.seq;
    }
    return this.page[0];
  }

  /** `rowsSay` is what is wrong with the rows at the checkpoint's head, or null. */
  private async check(cp: Stored, rowsSay: string | null) {
    const found: StoredCheckpointProblem[] = [];
    const problem = (kind: StoredCheckpointProblemKind, detail: string) => found.push({ kind, seq: cp.seq, detail });
    const signed = await verifyJws(cp.jws, this.jwks, CHECKPOINT_TYP);
    if (!signed.ok) problem("signature_invalid", signed.reason);
    else if (signsOtherFields(signed.payload, cp, this.shard))
      problem("signature_invalid", "the JWS signs other fields than the checkpoint stores");
    if (rowsSay) problem("checkpoint_contradicts_rows", rowsSay);
    if (cp.fromSeq !== this.previous + 1)
      problem(
        "checkpoint_missing",
        `covers from seq ${cp.fromSeq}, but the checkpoint before ends at ${this.previous}: a checkpoint was removed`,
      );
    this.previous = cp.seq;
    this.compared = { seq: cp.seq, hash: cp.hash };
    this.report.checked++;
    if (found.length === 0) return;
    this.report.failed++;
    this.report.problems.push(...found.slice(0, MAX_PROBLEMS - this.report.problems.length));
  }
}
