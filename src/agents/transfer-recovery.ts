import type { Env } from "../config/env";
import { forEachShard } from "../ledger/shards";
import { TRANSFER_ABANDONED_MS } from "../ledger/transfers";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { walletOf } from "./wallet.do";

export { TRANSFER_ABANDONED_MS };
const PAGE = 50;
/** Attempts after which a transfer still pending is logged as stuck (about half an hour of backing off). */
export const STUCK_AFTER_ATTEMPTS = 5;
/** The longest a transfer waits between two of the cron's attempts. */
const MAX_BACKOFF_MS = 60 * 60_000;

/** When the cron may try a transfer again after its `attempts`-th try: a minute, doubling, at most an hour. */
export const nextAttemptAfter = (attempts: number, now: number) =>
  nowIso(now + Math.min(MAX_BACKOFF_MS, TRANSFER_ABANDONED_MS * 2 ** Math.max(0, attempts - 1)));

/**
 * The minute cron's backstop for money across ledger shards (payments and their refunds): every
 * transfer still pending once it is due (`TRANSFER_ABANDONED_MS` after it was sent, then backing
 * off after each attempt) is driven to its end by its agent's wallet object, in the agent's turn.
 * Each attempt is counted and pushes the transfer's next one back before it is handed over, so one
 * that cannot finish (a shard down, a fault to repair) gives way to the others instead of filling
 * every page. Driving is idempotent, so meeting the alarm or the paying turn itself changes
 * nothing. Answers how many transfers were handed over.
 */
export async function recoverTransfers(env: Env, now = Date.now()): Promise<number> {
  const due = nowIso(now);
  // One shard's database failing does not keep the other shards' transfers from their pass.
  const counts = await forEachShard(env, (db, shard) =>
    recoverInShard(db, shard).catch((error: unknown) => {
      log.warn("transfer_recover", { shard, error });
      return 0;
    }),
  );
  return counts.reduce((a, b) => a + b, 0);

  async function recoverInShard(db: D1Database, shard: number): Promise<number> {
    const { results } = await db
      .prepare(
        `SELECT id, agent_id AS agentId, attempts FROM ledger_transfers
         WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`,
      )
      .bind(due, PAGE)
      .all<{ id: string; agentId: string; attempts: number }>();
    if (results.length === 0) return 0;
    // Bookkeeping, not money: the rows stay pending, and only a driver's guarded phases decide them.
    await db.batch(
      results.map((t) =>
        db
          .prepare(
            "UPDATE ledger_transfers SET attempts = attempts + 1, next_attempt_at = ? WHERE id = ? AND status = 'pending'",
          )
          .bind(nextAttemptAfter(t.attempts + 1, now), t.id),
      ),
    );
    const byAgent = new Map<string, string[]>();
    for (const t of results) byAgent.set(t.agentId, [...(byAgent.get(t.agentId) ?? []), t.id]);
    // One wallet failing (its next attempt is already pushed back) does not keep the others from theirs.
    const resumed = await Promise.allSettled(
      [...byAgent].map(([agentId, ids]) => walletOf(env, agentId).resumeTransfers(shard, ids)),
    );
    for (const r of resumed) if (r.status === "rejected") log.warn("transfer_recover", { shard, error: r.reason });
    // Money parked in transit this long needs a person: the operator's alert (docs/operations.md).
    for (const t of results)
      if (t.attempts + 1 >= STUCK_AFTER_ATTEMPTS)
        log.error("transfer_stuck", { shard, id: t.id, agentId: t.agentId, attempts: t.attempts + 1 });
    return results.length;
  }
}
