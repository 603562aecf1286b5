import type { Env } from "../config/env";
import { guards, sqlStatement } from "../db/statements";
import { placementOf } from "../ledger/place";
import type { CommitPlan } from "../ledger/plan";
import { nowIso } from "../lib/time";

export type FreezeOutcome = "done" | "unchanged" | "not_found";

/**
 * Freezes or unfreezes an agent: one ledger batch that sets `frozen_at` and
 * appends the audit row naming the console user. Runs in the agent's wallet
 * object, between its payments; every payment batch also guards that the agent
 * is not frozen, so in the ledger's order each payment lands before the freeze
 * or is refused. Freezing a frozen agent (or unfreezing one that is not)
 * changes nothing and writes no row.
 */
export async function setFrozen(
  env: Env,
  agentId: string,
  frozen: boolean,
  reason: string | null,
  by: string,
): Promise<FreezeOutcome> {
  // Frozen is decided on the agent's home row, so the freeze and its audit row go to its home.
  // Every agent is in the directory from its creation on: one that is not does not exist.
  const home = await placementOf(env).ofKnown("agent", agentId);
  if (home === null) return "not_found";
  const result = await home.commit(freezePlan(agentId, frozen, reason, by, nowIso()));
  if (result.kind === "committed") return "done";
  if (result.reason === "agent_not_found") return "not_found";
  if (result.reason === "agent_already_frozen" || result.reason === "agent_not_frozen") return "unchanged";
  throw new Error(`freeze refused: ${result.reason}`);
}

function freezePlan(agentId: string, frozen: boolean, reason: string | null, by: string, at: string): CommitPlan {
  return {
    statements: [
      guards(
        ["agent_not_found", "EXISTS (SELECT 1 FROM agents WHERE id = ?)", agentId],
        frozen
          ? ["agent_already_frozen", "EXISTS (SELECT 1 FROM agents WHERE id = ? AND frozen_at IS NULL)", agentId]
          : ["agent_not_frozen", "EXISTS (SELECT 1 FROM agents WHERE id = ? AND frozen_at IS NOT NULL)", agentId],
      ),
      sqlStatement(
        "UPDATE agents SET frozen_at = ?, frozen_reason = ? WHERE id = ?",
        frozen ? at : null,
        frozen ? reason : null,
        agentId,
      ),
    ],
    audit: [
      {
        type: frozen ? "agent.frozen" : "agent.unfrozen",
        reference: null,
        chargeId: null,
        agentId,
        merchantId: null,
        amountMinor: 0,
        currency: "USD",
        data: frozen ? { by, reason } : { by },
        createdAt: at,
      },
    ],
  };
}
