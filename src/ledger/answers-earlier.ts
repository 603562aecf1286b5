import type { Env } from "../config/env";
import { type IdempotencySlot, PENDING_FIGURE } from "../db/idempotency";
import { ID_PREFIXES } from "../lib/ids";
import { nowIso } from "../lib/time";
import type { Place } from "./place";
import { driveTransfer } from "./transfer-drive";

const DAY_MS = 24 * 3600_000;

/**
 * A retry whose first answer was lost across shards: the request's 5xx freed its key before the
 * transfer it sent was settled, so no answer was stored, and the request would pay again (a draw,
 * a checkout payment make a new charge each time; an approval would be found granted). This finds
 * the agent's transfers sent from `home` under the same key (kept 24 h, as keys are), drives any
 * still pending, and answers the first completed one's 200 body, as that request would have been
 * answered. A transfer still pending after that throws (a 5xx: the key is freed for a retry that
 * finds it decided).
 */
export async function earlierAnswerUnderKey(
  env: Env,
  home: Place,
  agentId: string,
  slot: IdempotencySlot,
): Promise<Record<string, unknown> | null> {
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
    return JSON.parse(
      state.answer.template.replace(
        `"merchantBalanceMinor":${PENDING_FIGURE}`,
        `"merchantBalanceMinor":${state.merchantBalanceMinor}`,
      ),
    ) as Record<string, unknown>;
  }
  return null;
}

/**
 * The agent whose payment the object `id` holds, read where it lives: an approval's (a payment held
 * for a human, granted by its id). Null for an object that holds none, or none of that id.
 */
export async function payerHeldBy(at: Place, id: string): Promise<string | null> {
  if (!id.startsWith(ID_PREFIXES.approval)) return null;
  const row = await at.db.prepare("SELECT agent_id AS agentId FROM approvals WHERE id = ?").bind(id).first<{
    agentId: string;
  }>();
  return row?.agentId ?? null;
}
