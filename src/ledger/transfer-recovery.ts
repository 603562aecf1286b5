import type { Env } from "../config/env";
import type { FaultContext } from "../lib/faults";
import { log } from "../lib/log";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";
import { placementOf } from "./place";
import { driveLogged } from "./transfer-intents";
import { TRANSFER_ABANDONED_MS } from "./transfers";

export { TRANSFER_ABANDONED_MS };

const PAGE = 50;
/** Attempts after which a transfer still pending is logged as stuck (about half an hour of backing off). */
export const STUCK_AFTER_ATTEMPTS = 5;
/** The longest a transfer waits between two of the cron's attempts. */
const MAX_BACKOFF_MS = 60 * 60_000;

/** When the cron may try a transfer again after its `attempts`-th try: a minute, doubling, at most an hour. */
export const nextAttemptAfter = (attempts: number, now: number) =>
  nowIso(now + Math.min(MAX_BACKOFF_MS, TRANSFER_ABANDONED_MS * 2 ** Math.max(0, attempts - 1)));

/** An agent's transfers the cron hands to its turn: their ids, all sent from one shard. */
export interface DueTransfers {
  from: number;
  ids: string[];
}

/**
 * The turn an agent's transfers are driven in: its wallet object's, ordered with its payments, so the
 * figures it keeps between payments see every change to its money. The ledger reaches it by its
 * binding and asks one thing of it: to run `driveDue` in that turn.
 */
interface AgentTurn {
  resumeTransfers(due: DueTransfers): Promise<unknown>;
}
const agentTurnOf = (env: Env, agentId: string): AgentTurn => env.WALLET.getByName(agentId);

/**
 * Drives an agent's due transfers, in its turn (the wallet object's `resumeTransfers`). One that
 * cannot be driven now (its other shard down, say) does not hold the others. Answers how each stands.
 */
export async function driveDue(env: Env, { from, ids }: DueTransfers, context: FaultContext = {}) {
  const states = [];
  for (const id of ids) states.push((await driveLogged(env, from, id, context))?.status ?? "pending");
  return states;
}

/**
 * The minute cron's backstop for money across ledger shards (payments and their refunds): every
 * transfer still pending once it is due (`TRANSFER_ABANDONED_MS` after it was sent, then backing
 * off after each attempt) is driven to its end in its agent's turn. Each attempt is counted and
 * pushes the transfer's next one back before it is handed over, so one that cannot finish (a shard
 * down, a fault to repair) gives way to the others instead of filling every page. Driving is
 * idempotent, so meeting the alarm or the paying turn itself changes nothing. Answers how many
 * transfers were handed over.
 */
export async function recoverTransfers(env: Env, now = Date.now()): Promise<number> {
  // One shard's database failing does not keep the other shards' transfers from their pass.
  const counts = await Promise.all(
    placementOf(env)
      .each()
      .map((at) =>
        recoverIn(env, at.db, at.shard, now).catch((error: unknown) => {
          log.warn("transfer_recover", { shard: at.shard, error });
          return 0;
        }),
      ),
  );
  return counts.reduce((a, b) => a + b, 0);
}

async function recoverIn(env: Env, db: D1Database, shard: number, now: number): Promise<number> {
  // A page's worst case: its read and its batch, and a wallet's turn for each transfer of it.
  if (!roomFor({ d1Queries: 2, subrequests: PAGE }, "transfer_recover", { shard })) return 0;
  const { results } = await db
    .prepare(
      `SELECT id, agent_id AS agentId, attempts FROM ledger_transfers
       WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?`,
    )
    .bind(nowIso(now), PAGE)
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
    [...byAgent].map(([agentId, ids]) => agentTurnOf(env, agentId).resumeTransfers({ from: shard, ids })),
  );
  for (const r of resumed) if (r.status === "rejected") log.warn("transfer_recover", { shard, error: r.reason });
  // Money parked in transit this long needs a person: the operator's alert (docs/operations.md).
  for (const t of results)
    if (t.attempts + 1 >= STUCK_AFTER_ATTEMPTS)
      log.error("transfer_stuck", { shard, id: t.id, agentId: t.agentId, attempts: t.attempts + 1 });
  return results.length;
}
