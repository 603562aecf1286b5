import { dbOfShard } from "../db/shards";
import { PENDING_FIGURE, type IdempotencySlot } from "../db/idempotency";
import { settingsOf, type Env } from "../config/env";
import { ownerShard, UnknownOwner } from "../ledger/directory";
import { nowIso } from "../lib/time";
import { driveTransfer } from "./wallet-transfer";

const DAY_MS = 24 * 3600_000;

/**
 * A retry whose first answer was lost across shards: the request's 5xx freed its key before the
 * transfer it sent was settled, so no answer was stored, and the route would pay again (a draw, a
 * checkout payment make a new charge each time; an approval would be found granted). This finds the
 * agent's transfers sent under the same key (kept 24 h, as keys are), drives any still pending, and
 * answers the first completed one's 200 body, as that request would have been answered. A transfer
 * still pending after that throws (a 5xx: the key is freed for a retry that finds it decided).
 * Nothing to read with one shard: no transfer exists there.
 */
export async function earlierAnswerUnderKey(
  env: Env,
  agentId: string,
  slot: IdempotencySlot | undefined,
): Promise<Record<string, unknown> | null> {
  if (!slot || settingsOf(env).ledgerShards === 1) return null;
  let home: number;
  try {
    home = await ownerShard(env, "agent", agentId);
  } catch (error) {
    if (error instanceof UnknownOwner) return null;
    throw error;
  }
  const { results } = await dbOfShard(env, home)
    .prepare(
      `SELECT id FROM ledger_transfers WHERE agent_id = ? AND created_at >= ? AND status <> 'reversed'
         AND json_extract(answer, '$.slot.scope') = ? AND json_extract(answer, '$.slot.key') = ?`,
    )
    .bind(agentId, nowIso(Date.now() - DAY_MS), slot.scope, slot.key)
    .all<{ id: string }>();
  for (const { id } of results) {
    const state = await driveTransfer(env, home, id);
    if (state.status === "pending") throw new Error(`transfer ${id} sent under this key is still pending`);
    if (state.status !== "completed" || !state.answer.template) continue;
    return JSON.parse(
      state.answer.template.replace(
        `"merchantBalanceMinor":${PENDING_FIGURE}`,
        `"merchantBalanceMinor":${state.merchantBalanceMinor}`,
      ),
    ) as Record<string, unknown>;
  }
  return null;
}
