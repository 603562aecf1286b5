import type { Env } from "../env";
import { walletOf } from "../agents/wallet.do";
import type { PayOutcome } from "../agents/wallet";
import { newPendingCharge, type ChargeView } from "../charges/service";
import { guard, sqlStatement } from "../ledger/plan";
import { faultPoint } from "../lib/faults";
import { nowIso } from "../lib/time";
import { outboxEvent } from "../webhooks/outbox";
import type { IdempotencySlot } from "../lib/idempotency";

export interface DrawRequest {
  grantId: string;
  amountMinor: number;
  description: string | null;
}

export type DrawOutcome =
  | { kind: "paid"; charge: ChargeView; spentMinor: number; remainingMinor: number; exhausted: boolean }
  | Exclude<PayOutcome, { kind: "paid" } | { kind: "approval" }>;

interface GrantState {
  id: string;
  paylinkId: string;
  agentId: string;
  merchantId: string;
  spentMinor: number;
  uses: number;
  budgetMinor: number;
  perChargeMinor: number | null;
  maxUses: number | null;
  expiresAt: string | null;
  merchantName: string;
  merchantCategory: string | null;
}

const GRANT_SELECT = `SELECT g.id, g.paylink_id AS paylinkId, g.agent_id AS agentId, g.merchant_id AS merchantId, g.spent_minor AS spentMinor,
  g.uses, g.budget_minor AS budgetMinor, p.per_charge_minor AS perChargeMinor, p.max_uses AS maxUses, p.expires_at AS expiresAt,
  m.name AS merchantName, m.category AS merchantCategory
  FROM paylink_grants g JOIN paylinks p ON p.id = g.paylink_id JOIN merchants m ON m.id = g.merchant_id WHERE g.id = ?`;

/**
 * The grant's own limits, in the order the draw table implies: states that
 * end the grant (409) before amounts that are merely too large (402).
 */
function checkGrant(grant: GrantState, amountMinor: number, now: number): DrawOutcome | null {
  const remaining = grant.budgetMinor - grant.spentMinor;
  if (grant.expiresAt !== null && grant.expiresAt <= nowIso(now)) return { kind: "conflict", reason: "paylink_expired" };
  if (remaining <= 0) return { kind: "conflict", reason: "paylink_exhausted" };
  if (grant.maxUses !== null && grant.uses >= grant.maxUses) return { kind: "conflict", reason: "max_uses_alcanzado" };
  if (grant.perChargeMinor !== null && amountMinor > grant.perChargeMinor) return { kind: "rejected", reason: "excede_tope_por_uso" };
  if (amountMinor > remaining) return { kind: "rejected", reason: `excede_presupuesto_restante_${remaining}` };
  return null;
}

/**
 * One draw on a grant. Runs inside the grant's Durable Object, so draws on one
 * grant never interleave: the grant's budget, cap, count and expiry are
 * checked, then the agent's wallet object applies hard limits and the balance,
 * and a single batch creates the paid charge, moves the money and the grant's
 * figures. The batch re-checks the figures it read, so nothing is written on
 * any refusal.
 */
export async function drawOnGrant(env: Env, request: DrawRequest, slot?: IdempotencySlot): Promise<DrawOutcome> {
  const now = Date.now();
  const grant = (await env.DB.prepare(GRANT_SELECT).bind(request.grantId).first()) as GrantState | null;
  if (!grant) return { kind: "conflict", reason: "sin_grant_del_agente" };
  const refused = checkGrant(grant, request.amountMinor, now);
  if (refused) return refused;

  const spentMinor = grant.spentMinor + request.amountMinor;
  const exhausted = spentMinor === grant.budgetMinor;
  const at = nowIso(now);
  const charge = {
    ...newPendingCharge(grant.merchantId, { amountMinor: request.amountMinor, description: request.description, paylinkGrantId: grant.id }, at),
    merchantName: grant.merchantName,
    merchantCategory: grant.merchantCategory,
  };
  const grantStatements = [
    // Optimistic check of the figures this decision read (the object serializes draws; this makes it certain).
    guard("paylink_grant_changed", "EXISTS (SELECT 1 FROM paylink_grants WHERE id = ? AND spent_minor = ? AND uses = ?)", grant.id, grant.spentMinor, grant.uses),
    sqlStatement("UPDATE paylink_grants SET spent_minor = spent_minor + ?, uses = uses + 1 WHERE id = ?", request.amountMinor, grant.id),
    ...(exhausted ? [outboxEvent("budget.exhausted", grant.merchantId, { paylinkId: grant.paylinkId, grantId: grant.id, agentId: grant.agentId, spentMinor }, at)] : []),
  ];
  const figures = { spentMinor, remainingMinor: grant.budgetMinor - spentMinor, exhausted };
  faultPoint("draw.before_wallet");
  const outcome = await walletOf(env, grant.agentId).drawFromWallet(
    grant.agentId, charge, grantStatements, { paylinkId: grant.paylinkId, grantId: grant.id }, slot && { ...slot, view: { kind: "draw", ...figures } },
  );
  if (outcome.kind !== "paid") return outcome.kind === "approval" ? { kind: "conflict", reason: "unexpected_approval" } : outcome;
  faultPoint("draw.after_commit");
  return { kind: "paid", charge: outcome.charge, ...figures };
}
