import type { IdempotencySlot } from "../db/idempotency";
import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
import { answerBody, driveTransfer } from "../ledger/transfer-drive";
import { nowIso } from "../lib/time";

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
  const place = placementOf(env);
  if (!slot || !place.sharded) return null;
  const home = await place.ofKnown("agent", agentId);
  if (!home) return null;
  const { results } = await home.db
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
    return JSON.parse(answerBody(state.answer.template, state.merchantBalanceMinor)) as Record<string, unknown>;
  }
  return null;
}
