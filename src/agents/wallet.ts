import type { Env } from "../env";
import { settingsOf } from "../env";
import { executeBatch } from "../db/batch";
import { chargeView, type ChargeRow, type ChargeView } from "../charges/service";
import { ledgerOf } from "../ledger/ledger.do";
import { agentCreditPlan, walletPaymentPlan } from "../ledger/movements";
import { guard, sqlStatement } from "../ledger/plan";
import { canonicalJson } from "../ledger/audit";
import { newId } from "../lib/ids";
import { nowIso, utcDayStart } from "../lib/time";
import { outboxEvent } from "../webhooks/outbox";
import { evaluatePolicy, parseStoredPolicy, POLICY_REASONS, type Policy } from "./policy";

/** Outcomes of a wallet operation; routes map each to a status in one table. */
export type PayOutcome =
  | { kind: "paid"; charge: ChargeView; merchantBalanceMinor: number }
  | { kind: "approval"; approvalId: string; reason: string; expiresAt: string; charge: ChargeView }
  | { kind: "rejected"; reason: string }
  | { kind: "conflict"; reason: string }
  | { kind: "not_found"; reason: string };

interface ChargeSnapshot extends ChargeRow {
  merchantName: string;
  merchantCategory: string | null;
}

interface ApprovalSnapshot {
  id: string;
  chargeId: string;
  agentId: string;
  status: string;
  reason: string;
  expiresAt: string;
}

const CHARGE_SELECT = `SELECT c.id, c.merchant_id AS merchantId, c.agent_id AS agentId, c.amount_minor AS amountMinor, c.currency,
  c.description, c.external_id AS externalId, c.status, c.method, c.reference, c.created_at AS createdAt, c.paid_at AS paidAt,
  m.name AS merchantName, m.category AS merchantCategory
  FROM charges c JOIN merchants m ON m.id = c.merchant_id WHERE c.id = ?`;

const APPROVAL_SELECT = `SELECT id, charge_id AS chargeId, agent_id AS agentId, status, reason, expires_at AS expiresAt FROM approvals`;

/** What a payment decision needs, read in one batch so it is one consistent snapshot. */
async function readPaymentState(env: Env, agentId: string, chargeId: string, now: number) {
  const db = env.DB;
  const [charge, agent, spent, approval] = await db.batch([
    db.prepare(CHARGE_SELECT).bind(chargeId),
    db.prepare("SELECT balance_minor AS balanceMinor, policy FROM agents WHERE id = ?").bind(agentId),
    db.prepare(
      `SELECT COALESCE(SUM(amount_minor), 0) AS spent FROM charges
       WHERE agent_id = ? AND status = 'paid' AND method IN ('ledger', 'paylink') AND paid_at >= ?`,
    ).bind(agentId, utcDayStart(now)),
    db.prepare(`${APPROVAL_SELECT} WHERE charge_id = ? AND status = 'pending'`).bind(chargeId),
  ]);
  const agentRow = agent?.results[0] as { balanceMinor: number; policy: string } | undefined;
  return {
    charge: charge?.results[0] as ChargeSnapshot | undefined,
    agent: agentRow ? { balanceMinor: agentRow.balanceMinor, policy: parseStoredPolicy(agentRow.policy) } : undefined,
    spentTodayMinor: (spent?.results[0] as { spent: number } | undefined)?.spent ?? 0,
    pendingApproval: approval?.results[0] as ApprovalSnapshot | undefined,
  };
}

const toChargeRow = (c: ChargeSnapshot): ChargeRow => ({
  id: c.id, merchantId: c.merchantId, agentId: c.agentId, amountMinor: c.amountMinor, currency: c.currency,
  description: c.description, externalId: c.externalId, status: c.status, method: c.method, reference: c.reference,
  createdAt: c.createdAt, paidAt: c.paidAt,
});

function decide(policy: Policy, charge: ChargeSnapshot, balanceMinor: number, spentTodayMinor: number, skipApprovalThreshold: boolean) {
  return evaluatePolicy(policy, {
    amountMinor: charge.amountMinor,
    merchantCategory: charge.merchantCategory,
    spentTodayMinor,
    balanceMinor,
    skipApprovalThreshold,
  });
}

/** Commits a wallet payment of a pending charge and answers the paid outcome, or why it did not land. */
async function commitPayment(env: Env, agentId: string, charge: ChargeSnapshot, extra: Parameters<typeof walletPaymentPlan>[0]["extraStatements"], auditData?: Record<string, unknown>): Promise<PayOutcome> {
  const paidAt = nowIso();
  const reference = newId("payment");
  const result = await ledgerOf(env).commit(
    walletPaymentPlan({ charge, agentId, method: "ledger", reference, paidAt, extraStatements: extra, auditData }),
  );
  if (result.kind === "refused") {
    if (result.reason === POLICY_REASONS.balance) return { kind: "rejected", reason: result.reason };
    return { kind: "conflict", reason: result.reason };
  }
  const merchantBalanceMinor = (result.results.at(-1)?.[0] as { balanceMinor: number } | undefined)?.balanceMinor ?? 0;
  const paid: ChargeRow = { ...toChargeRow(charge), status: "paid", agentId, method: "ledger", reference, paidAt };
  return { kind: "paid", charge: chargeView(paid), merchantBalanceMinor };
}

/**
 * Pays a charge from the agent's wallet. Runs inside the agent's wallet
 * Durable Object, so no two decisions for one agent interleave; the charge's
 * own state is guarded in the batch, so two agents can never both pay it.
 */
export async function payCharge(env: Env, agentId: string, chargeId: string): Promise<PayOutcome> {
  const now = Date.now();
  const state = await readPaymentState(env, agentId, chargeId, now);
  const { charge, agent } = state;
  if (!charge) return { kind: "not_found", reason: "charge_not_found" };
  if (!agent) return { kind: "not_found", reason: "agent_not_found" };
  if (charge.status !== "pending") return { kind: "conflict", reason: "charge_not_pending" };

  const decision = decide(agent.policy, charge, agent.balanceMinor, state.spentTodayMinor, false);
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  if (decision.kind === "approval") return requestApproval(env, agentId, charge, decision.reason, state.pendingApproval, now);
  return commitPayment(env, agentId, charge, []);
}

/**
 * Holds a payment for a human. Paying again while this agent's approval is
 * pending returns that same approval; an expired one is replaced.
 */
async function requestApproval(env: Env, agentId: string, charge: ChargeSnapshot, reason: string, existing: ApprovalSnapshot | undefined, now: number): Promise<PayOutcome> {
  const view = chargeView(toChargeRow(charge));
  const createdAt = nowIso(now);
  const expireStale = [];
  if (existing) {
    const expired = existing.expiresAt <= createdAt;
    if (!expired && existing.agentId === agentId) {
      return { kind: "approval", approvalId: existing.id, reason: existing.reason, expiresAt: existing.expiresAt, charge: view };
    }
    // At most one pending approval per charge: another agent's live approval holds the charge.
    if (!expired) return { kind: "conflict", reason: "charge_awaiting_approval" };
    expireStale.push(sqlStatement("UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'", createdAt, existing.id));
  }
  const approvalId = newId("approval");
  const expiresAt = nowIso(now + settingsOf(env).approvalTtlMs);
  try {
    await executeBatch(env.DB, [
      ...expireStale,
      sqlStatement(
        `INSERT INTO approvals (id, charge_id, agent_id, merchant_id, amount_minor, reason, status, expires_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
        approvalId, charge.id, agentId, charge.merchantId, charge.amountMinor, reason, expiresAt, createdAt,
      ),
      outboxEvent("approval.required", charge.merchantId, { approvalId, reason, expiresAt, chargeId: charge.id, agentId, merchantId: charge.merchantId, amountMinor: charge.amountMinor }, createdAt),
    ]);
  } catch (error) {
    // The partial unique index lost a race with another agent's approval for this charge.
    if (String(error).includes("UNIQUE constraint failed")) return { kind: "conflict", reason: "charge_awaiting_approval" };
    throw error;
  }
  return { kind: "approval", approvalId, reason, expiresAt, charge: view };
}

export type GrantOutcome = PayOutcome;

/**
 * Grants a held payment: the approval flips to granted in the same batch that
 * pays the charge. Hard limits and the balance still apply; if they no longer
 * allow it the approval stays pending (402).
 */
export async function grantApproval(env: Env, agentId: string, approvalId: string, decidedBy: string): Promise<GrantOutcome> {
  const now = Date.now();
  const approval = (await env.DB.prepare(`${APPROVAL_SELECT} WHERE id = ?`).bind(approvalId).first()) as ApprovalSnapshot | null;
  if (!approval || approval.agentId !== agentId) return { kind: "not_found", reason: "approval_not_found" };
  const check = await checkApprovalOpen(env, approval, now);
  if (check) return check;
  const state = await readPaymentState(env, agentId, approval.chargeId, now);
  const { charge, agent } = state;
  if (!charge || !agent) return { kind: "not_found", reason: "charge_not_found" };
  if (charge.status !== "pending") return { kind: "conflict", reason: "charge_not_pending" };
  const decision = decide(agent.policy, charge, agent.balanceMinor, state.spentTodayMinor, true);
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  const decidedAt = nowIso(now);
  return commitPayment(env, agentId, charge, [
    guard("approval_not_pending", "EXISTS (SELECT 1 FROM approvals WHERE id = ? AND status = 'pending' AND expires_at > ?)", approvalId, decidedAt),
    sqlStatement("UPDATE approvals SET status = 'granted', decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'", decidedAt, decidedBy, approvalId),
  ], { approvalId, approvedBy: decidedBy });
}

/** Null when the approval can still be decided; otherwise the conflict, marking an overdue one expired. */
export async function checkApprovalOpen(env: Env, approval: ApprovalSnapshot, now: number): Promise<PayOutcome | null> {
  if (approval.status !== "pending") return { kind: "conflict", reason: "approval_not_pending" };
  const at = nowIso(now);
  if (approval.expiresAt <= at) {
    await env.DB.prepare("UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'").bind(at, approval.id).run();
    return { kind: "conflict", reason: "approval_expired" };
  }
  return null;
}

/** Credits the wallet from outside (a manual top-up), recorded in the ledger and the audit chain. */
export async function creditWallet(env: Env, agentId: string, amountMinor: number, reference: string | null, by: string): Promise<{ ok: true; balanceMinor: number } | { ok: false; reason: string }> {
  const result = await ledgerOf(env).commit(agentCreditPlan({ agentId, amountMinor, transferId: newId("credit"), reference, by, createdAt: nowIso() }));
  if (result.kind === "refused") return { ok: false, reason: result.reason };
  return { ok: true, balanceMinor: (result.results.at(-1)?.[0] as { balanceMinor: number }).balanceMinor };
}

/** Replaces the agent's policy; returns false if the agent does not exist. */
export async function setPolicy(env: Env, agentId: string, policy: Policy): Promise<boolean> {
  const result = await env.DB.prepare("UPDATE agents SET policy = ? WHERE id = ?").bind(canonicalJson(policy), agentId).run();
  return result.meta.changes > 0;
}
