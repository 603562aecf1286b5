import type { Env } from "../env";
import { forEachShard } from "../ledger/shards";
import { nowIso } from "../lib/time";
import { walletOf } from "./wallet.do";

/** A transfer pending longer than this lost its driver (its wallet's turn and alarm): the cron drives it. */
export const TRANSFER_ABANDONED_MS = 60_000;
const PAGE = 50;

/**
 * The minute cron's backstop for payments across ledger shards: every transfer still pending a
 * while after it was sent is driven to its end by its agent's wallet object, in the agent's turn.
 * Driving is idempotent, so meeting the alarm or the paying turn itself changes nothing. Answers
 * how many transfers were handed over.
 */
export async function recoverTransfers(env: Env, now = Date.now()): Promise<number> {
  const before = nowIso(now - TRANSFER_ABANDONED_MS);
  const counts = await forEachShard(env, async (db, shard) => {
    const { results } = await db
      .prepare(
        "SELECT id, agent_id AS agentId FROM ledger_transfers WHERE status = 'pending' AND created_at < ? ORDER BY created_at LIMIT ?",
      )
      .bind(before, PAGE)
      .all<{ id: string; agentId: string }>();
    const byAgent = new Map<string, string[]>();
    for (const t of results) byAgent.set(t.agentId, [...(byAgent.get(t.agentId) ?? []), t.id]);
    await Promise.all([...byAgent].map(([agentId, ids]) => walletOf(env, agentId).resumeTransfers(shard, ids)));
    return results.length;
  });
  return counts.reduce((a, b) => a + b, 0);
}
