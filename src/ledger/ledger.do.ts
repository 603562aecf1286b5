import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import { faultPoint } from "../lib/faults";
import { serialQueue } from "../lib/serial";
import { canonicalJson, chainHash, GENESIS_HASH, type AuditRow } from "./audit";
import { guardReasonOf, sqlStatement, type CommitPlan } from "./plan";

/** A result row of a plan statement, as D1 returns it. */
export type SqlRow = Record<string, string | number | null>;

export type CommitResult =
  | { kind: "committed"; auditSeqs: number[]; results: SqlRow[][] }
  | { kind: "refused"; reason: string };

/**
 * The single sequencer of the audit chain. Every money movement is committed
 * here, one at a time, so each audit row can name its predecessor's hash and
 * `seq` stays gap-free. D1 is the source of truth: the head is read from it on
 * first use and after any failed batch, and `seq` is the primary key, so a
 * stale head can only abort a batch, never fork the chain.
 */
export class LedgerDurableObject extends DurableObject<Env> {
  private head: { seq: number; hash: string } | null = null;
  private readonly serialize = serialQueue();

  /** Applies one plan as one D1 batch with its audit rows appended. */
  commit(plan: CommitPlan): Promise<CommitResult> {
    return this.serialize(() => this.apply(plan));
  }

  private async apply(plan: CommitPlan): Promise<CommitResult> {
    const head = this.head ?? (await this.readHead());
    const audit: AuditRow[] = [];
    let prev = head;
    for (const draft of plan.audit) {
      const seq = prev.seq + 1;
      const hash = await chainHash(prev.hash, seq, draft);
      audit.push({ ...draft, seq, prevHash: prev.hash, hash });
      prev = { seq, hash };
    }
    const statements = [
      ...plan.statements,
      ...audit.map((row) =>
        sqlStatement(
          `INSERT INTO audit_events (seq, type, reference, charge_id, agent_id, merchant_id, amount_minor, currency, data, created_at, prev_hash, hash)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          row.seq, row.type, row.reference, row.chargeId, row.agentId, row.merchantId, row.amountMinor, row.currency,
          canonicalJson(row.data), row.createdAt, row.prevHash, row.hash,
        ),
      ),
    ];
    const db = this.env.DB;
    const abort = () => this.ctx.abort("fault injection");
    try {
      faultPoint("ledger.before_batch", { abort });
      const results = await db.batch(statements.map((s) => db.prepare(s.sql).bind(...s.params)));
      this.head = prev;
      faultPoint("ledger.after_batch", { abort });
      return { kind: "committed", auditSeqs: audit.map((row) => row.seq), results: results.slice(0, plan.statements.length).map((r) => (r.results ?? []) as SqlRow[]) };
    } catch (error) {
      // Whatever happened, the batch was rolled back; re-read the head before the next commit.
      this.head = null;
      const reason = guardReasonOf(error);
      if (reason) return { kind: "refused", reason };
      throw error;
    }
  }

  private async readHead(): Promise<{ seq: number; hash: string }> {
    const row = await this.env.DB.prepare("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").first<{ seq: number; hash: string }>();
    return row ? { seq: row.seq, hash: row.hash } : { seq: 0, hash: GENESIS_HASH };
  }
}

/** The one ledger sequencer. */
export const ledgerOf = (env: Env) => env.LEDGER.getByName("ledger");
