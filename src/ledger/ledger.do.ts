import { DurableObject } from "cloudflare:workers";
import type { Env } from "../config/env";
import { dbOfShard } from "../db/shards";
import { guardReasonOf, mergeAppends, type SqlStatement } from "../db/statements";
import { faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { type AuditRow, auditInserts, chainHash, genesisHashOf, sealed } from "./chain";
import type { CommitPlan } from "./plan";

/** A result row of a plan statement, as D1 returns it. */
export type SqlRow = Record<string, string | number | null>;

export type CommitResult =
  /** `results`: one per statement of the plan's own, in order; its appendable inserts, merged with the group's, have none. */
  { kind: "committed"; auditSeqs: number[]; results: SqlRow[][] } | { kind: "refused"; reason: string };

/** The most plans one D1 batch carries (a payment plan is about ten statements). */
export const MAX_GROUP = 16;

interface Pending {
  plan: CommitPlan;
  /** Set once the plan's group (or the plan alone) was committed or refused, or failed. */
  outcome?: { ok: true; result: CommitResult } | { ok: false; error: unknown };
}

/** A plan that a guard refused inside a group: the group is committed again one plan at a time. */
class GroupRefused extends Error {}

/**
 * The sequencer of one ledger shard's audit chain (one object per shard). Every money movement is committed
 * here, in order, so each audit row can name its predecessor's hash and `seq`
 * stays gap-free. Plans that arrive while a batch is in flight are committed
 * together in the next one (group commit, as TigerBeetle batches transfers):
 * under load one D1 batch carries many payments, and alone a plan goes at
 * once. If a guard refuses any plan of a group, nothing of the group was
 * written (one batch, one transaction) and its plans are committed again one
 * by one, so only the refused plan is refused. D1 is the source of truth: the
 * head is read from it on first use and after any failed batch, and `seq` is
 * the primary key, so a stale head can only abort a batch, never fork the chain.
 */
export class LedgerDurableObject extends DurableObject<Env> {
  private head: { seq: number; hash: string } | null = null;
  private readonly waiting: Pending[] = [];
  /** The group being committed right now, if any; callers whose plan is not in it wait for it. */
  private inFlight: Promise<void> | null = null;
  /** Since this object started: D1 batches run, the plans they carried and their statements (for tests and the benchmark). */
  private readonly counts = { batches: 0, plans: 0, statements: 0 };
  /** Names this start of the object, so a reader of the counts can tell they began again. */
  private readonly started = crypto.randomUUID();
  /**
   * The shard this object sequences, pinned in its storage by the first plan it commits: a plan for
   * another shard is refused before anything is written, so a mis-routed plan can never land in the
   * wrong database or chain.
   */
  private shard: number | null = null;

  stats(): { batches: number; plans: number; statements: number; started: string; shard: number | null } {
    return { ...this.counts, started: this.started, shard: this.shard };
  }

  /**
   * Applies one plan, in one D1 batch with its audit rows appended (possibly
   * beside other plans). Each caller drives the queue only until its own plan
   * is decided, so one invocation commits a group or two, never an unbounded
   * run of them (D1 counts queries per invocation).
   */
  async commit(plan: CommitPlan): Promise<CommitResult> {
    const shard = plan.shard ?? 0;
    if (shard !== this.shard) await this.pin(shard);
    const mine: Pending = { plan };
    this.waiting.push(mine);
    while (!mine.outcome) {
      if (this.inFlight) {
        await this.inFlight;
        continue;
      }
      const group = this.waiting.splice(0, MAX_GROUP);
      this.inFlight = this.commitGroup(group).finally(() => {
        this.inFlight = null;
      });
      await this.inFlight;
    }
    if (mine.outcome.ok) return mine.outcome.result;
    throw mine.outcome.error;
  }

  private async commitGroup(group: Pending[]): Promise<void> {
    if (group.length > 1) {
      try {
        const results = await this.apply(group.map((p) => p.plan));
        for (const [i, p] of group.entries()) p.outcome = { ok: true, result: results[i]! };
        return;
      } catch (error) {
        // Refused or failed as a whole: nothing was written. Each plan alone decides its own outcome.
        if (!(error instanceof GroupRefused)) log.warn("ledger_group_commit", { plans: group.length, error });
      }
    }
    for (const pending of group) {
      try {
        pending.outcome = { ok: true, result: (await this.apply([pending.plan]))[0]! };
      } catch (error) {
        pending.outcome = { ok: false, error };
      }
    }
  }

  /** Commits `plans` as one D1 batch, in order; a guard's refusal is a result when there is one plan. */
  private async apply(plans: CommitPlan[]): Promise<CommitResult[]> {
    let prev = this.head ?? (await this.readHead());
    const statements: SqlStatement[] = [];
    const appendable: SqlStatement[] = [];
    const auditRows: AuditRow[] = [];
    const spans: { start: number; count: number; auditSeqs: number[] }[] = [];
    for (const plan of plans) {
      const auditSeqs: number[] = [];
      const start = statements.length;
      for (const statement of plan.statements) (statement.append ? appendable : statements).push(statement);
      spans.push({ start, count: statements.length - start, auditSeqs });
      for (const unsealed of plan.audit) {
        const draft = sealed(unsealed);
        const seq = prev.seq + 1;
        const hash = chainHash(prev.hash, seq, draft);
        auditRows.push({ ...draft, seq, prevHash: prev.hash, hash });
        auditSeqs.push(seq);
        prev = { seq, hash };
      }
    }
    // The group's appends (ledger entries, outbox events) and audit rows go last, merged a few
    // plans to a statement: no statement of a batch reads another plan's rows there (see SqlStatement.append).
    statements.push(...mergeAppends(appendable), ...auditInserts(auditRows));
    const db = dbOfShard(this.env, this.shard!);
    const abort = () => this.ctx.abort("fault injection");
    try {
      faultPoint("ledger.before_batch", { abort });
      const results = await db.batch(statements.map((s) => db.prepare(s.sql).bind(...s.params)));
      this.head = prev;
      this.counts.batches++;
      this.counts.plans += plans.length;
      this.counts.statements += statements.length;
      faultPoint("ledger.after_batch", { abort });
      return spans.map((span) => ({
        kind: "committed",
        auditSeqs: span.auditSeqs,
        results: results.slice(span.start, span.start + span.count).map((r) => (r.results ?? []) as SqlRow[]),
      }));
    } catch (error) {
      // Whatever happened, the batch was rolled back; re-read the head before the next commit.
      this.head = null;
      const reason = guardReasonOf(error);
      if (reason && plans.length === 1) return [{ kind: "refused", reason }];
      if (reason) throw new GroupRefused(reason);
      throw error;
    }
  }

  private async pin(shard: number): Promise<void> {
    if (this.shard === null) {
      const pinned = await this.ctx.storage.get<number>("shard");
      if (pinned === undefined) await this.ctx.storage.put("shard", shard);
      this.shard = pinned ?? shard;
    }
    if (shard !== this.shard)
      throw new Error(`a plan for ledger shard ${shard} reached the sequencer of shard ${this.shard}`);
  }

  private async readHead(): Promise<{ seq: number; hash: string }> {
    const row = await dbOfShard(this.env, this.shard!)
      .prepare("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
      .first<{
        seq: number;
        hash: string;
      }>();
    return row ? { seq: row.seq, hash: row.hash } : { seq: 0, hash: genesisHashOf(this.shard!) };
  }
}

/** The name of shard `shard`'s sequencer; shard 0's is the one the service always had. */
export const ledgerName = (shard: number) => (shard === 0 ? "ledger" : `ledger:${shard}`);

/** The sequencer of ledger shard `shard`: its plans are stamped with the shard, which the object checks. */
export function ledgerOf(env: Env, shard: number) {
  const sequencer = env.LEDGER.getByName(ledgerName(shard));
  return { commit: (plan: CommitPlan) => sequencer.commit({ ...plan, shard }), stats: () => sequencer.stats() };
}
