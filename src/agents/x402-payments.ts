import type { Env } from "../config/env";
import { type SqlStatement, sqlStatement } from "../db/statements";
import { placementOf } from "../ledger/place";
import type { AgentX402Payment } from "../ledger/x402-out";

/** A stored outbound x402 payment, as its reads return it: what its batch recorded, and its life since. */
export type AgentX402PaymentRow = Omit<AgentX402Payment, "amountBaseUnits" | "nonce" | "header"> & {
  amountBaseUnits: bigint | number | string;
  status: string;
  txHash: string | null;
  settledAt: string | null;
};

/** The payment object of `/agent/x402/payments` (docs/api.md). */
export interface AgentX402PaymentView {
  paymentId: string;
  agentId: string;
  resource: string;
  payTo: string;
  network: string;
  asset: string;
  amountBaseUnits: string;
  status: string;
  transaction: string | null;
  validBefore: string;
  createdAt: string;
  settledAt: string | null;
}

export const agentX402PaymentView = (row: AgentX402PaymentRow): AgentX402PaymentView => ({
  paymentId: row.id,
  agentId: row.agentId,
  resource: row.resource,
  payTo: row.payTo,
  network: row.network,
  asset: row.asset,
  amountBaseUnits: String(row.amountBaseUnits),
  status: row.status,
  transaction: row.txHash,
  validBefore: new Date(row.validBefore * 1000).toISOString(),
  createdAt: row.createdAt,
  settledAt: row.settledAt,
});

// The amount read as text: exact past 2^53, as every base-unit figure is read.
const SELECT = `SELECT id, agent_id AS agentId, resource, pay_to AS payTo, network, asset,
  CAST(amount_base_units AS TEXT) AS amountBaseUnits, valid_before AS validBefore, status, tx_hash AS txHash,
  created_at AS createdAt, settled_at AS settledAt FROM agent_x402_payments`;

/** The agent's outbound x402 payments, newest first; null for an agent that does not exist. */
export async function listAgentX402Payments(
  env: Env,
  agentId: string,
  limit: number,
): Promise<AgentX402PaymentView[] | null> {
  const home = await placementOf(env).ofKnown("agent", agentId);
  if (!home) return null;
  // One shard knows no directory: whether the agent exists is read beside its payments.
  const [agent, payments] = await home.db.batch([
    home.db.prepare("SELECT 1 AS found FROM agents WHERE id = ?").bind(agentId),
    home.db.prepare(`${SELECT} WHERE agent_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`).bind(agentId, limit),
  ]);
  if (agent!.results.length === 0) return null;
  const results = payments!.results as unknown as AgentX402PaymentRow[];
  return results.map(agentX402PaymentView);
}

/** One of the agent's outbound x402 payments; null when unknown or another agent's. */
export async function getAgentX402Payment(
  env: Env,
  agentId: string,
  paymentId: string,
): Promise<AgentX402PaymentView | null> {
  const at = placementOf(env).ofId(paymentId);
  const row = at
    ? await at.db
        .prepare(`${SELECT} WHERE id = ? AND agent_id = ?`)
        .bind(paymentId, agentId)
        .first<AgentX402PaymentRow>()
    : null;
  return row ? agentX402PaymentView(row) : null;
}

/**
 * What the agent (an SQL expression) paid to x402 paywalls since `since` (an SQL expression), exact
 * in base units: every payment signed then, released ones included (a release gives the money back,
 * not the day's allowance, as a refund does not).
 */
export const x402PaidByAgentSince = (agentId: string, since: string) =>
  `COALESCE((SELECT SUM(amount_base_units) FROM agent_x402_payments
         WHERE agent_id = ${agentId} AND created_at >= ${since}), 0)`;

/** The agent's payment once `settled`, as a receipt shows it; no row while authorized, released, unknown or another agent's. */
export const settledAgentX402PaymentRow = (paymentId: string, agentId: string): SqlStatement =>
  sqlStatement(`${SELECT} WHERE id = ? AND agent_id = ? AND status = 'settled'`, paymentId, agentId);
