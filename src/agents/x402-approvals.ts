import { settingsOf } from "../config/env";
import { storeResponseStatements } from "../db/idempotency";
import { executeBatch, guard, guardReasonOf, guards, type SqlStatement, sqlStatement } from "../db/statements";
import { AGENT_FROZEN, agentNotFrozenCheck } from "../ledger/movements";
import { outboxEvent } from "../ledger/outbox";
import { placementOf } from "../ledger/place";
import type { CommitPlan } from "../ledger/plan";
import type { AgentX402Payment } from "../ledger/x402-out";
import { newId } from "../lib/ids";
import { baseUnitsParam, centsIfWhole } from "../lib/money";
import { nowIso } from "../lib/time";
import type { WalletCall } from "./wallet-state";

/*
 * Approvals of an agent's outbound x402 payments. Such an approval holds no charge: it names the one
 * request it lets through (the agent, the resource, the payee, the network, the asset and the exact
 * amount). Granting it moves nothing; the agent's same request, made again before it expires, pays,
 * and the batch that debits the wallet and records the payment marks the approval used, so one grant
 * lets exactly one payment through.
 */

/** The one outbound request an approval names: the payment's facts that a repeat must match. */
export type X402Request = Pick<
  AgentX402Payment,
  "agentId" | "resource" | "payTo" | "network" | "asset" | "amountBaseUnits"
>;

/** An approval of the request that may still matter: pending, or granted and not used yet. */
export interface OpenX402Approval {
  id: string;
  status: "pending" | "granted";
  reason: string;
  expiresAt: string;
  decidedBy: string | null;
}

/** The refusal of a payment whose granted approval another payment used first (or that expired meanwhile). */
export const X402_APPROVAL_USED = "x402_approval_used";

/** A request held for a human: the approval and the 402 body that says so (as the wallet's charge payments word it). */
export interface X402Held {
  approvalId: string;
  reason: string;
  expiresAt: string;
  body: string;
}

const heldBody = (h: Omit<X402Held, "body">) =>
  JSON.stringify({ pendingApproval: true, reason: h.reason, approvalId: h.approvalId, expiresAt: h.expiresAt });

/** A pending approval asked again: the same answer. */
const heldAgain = (a: OpenX402Approval): X402Held => {
  const held = { approvalId: a.id, reason: a.reason, expiresAt: a.expiresAt };
  return { ...held, body: heldBody(held) };
};

/** The request's pending and granted-unused approvals, newest first, read in the agent's home. */
export async function openX402Approvals(db: D1Database, r: X402Request): Promise<OpenX402Approval[]> {
  const rows = await db
    .prepare(
      `SELECT id, status, reason, expires_at AS expiresAt, decided_by AS decidedBy FROM approvals
       WHERE charge_id IS NULL AND agent_id = ? AND resource = ? AND pay_to = ? AND amount_base_units = ?
         AND asset = ? AND status IN ('pending', 'granted') AND x402_payment_id IS NULL
       ORDER BY created_at DESC, rowid DESC`,
    )
    // Not the network: a paid entry is always on the service's one chain, which a version 1 and a
    // version 2 answer name differently (a grant of one covers the same request in the other).
    .bind(r.agentId, r.resource, r.payTo, baseUnitsParam(r.amountBaseUnits), r.asset)
    .all<OpenX402Approval>();
  return rows.results;
}

/**
 * Holds the request for a human. Asking again while its approval is pending answers that same
 * approval; an expired one is replaced. The new approval, its `approval.required` event (to the
 * endpoints of no merchant: the payee is nobody's merchant here) and the request's stored 402 are
 * one batch in the agent's home, guarded by the agent not being frozen. Nothing is signed or debited.
 */
export async function holdX402(
  { env, agentId, slot }: WalletCall,
  r: X402Request,
  reason: string,
  open: OpenX402Approval[],
  now: number,
): Promise<X402Held | { kind: "frozen" }> {
  const createdAt = nowIso(now);
  const pending = open.find((a) => a.status === "pending");
  if (pending && pending.expiresAt > createdAt) return heldAgain(pending);
  const home = await placementOf(env).ofAgent(agentId);
  const approvalId = newId("approval", home);
  const held = { approvalId, reason, expiresAt: nowIso(now + settingsOf(env).approvalTtlMs) };
  const body = heldBody(held);
  const amount = baseUnitsParam(r.amountBaseUnits);
  const amountMinor = centsIfWhole(r.amountBaseUnits);
  const data = {
    ...held,
    chargeId: null,
    agentId,
    merchantId: null,
    amountMinor,
    amountBaseUnits: r.amountBaseUnits.toString(),
    x402Payment: { resource: r.resource, payTo: r.payTo, network: r.network, asset: r.asset },
  };
  try {
    await executeBatch(home.db, [
      guard(...agentNotFrozenCheck(agentId)),
      ...(pending ? [expireStatement(pending.id, createdAt)] : []),
      sqlStatement(
        `INSERT INTO approvals (id, charge_id, agent_id, merchant_id, amount_minor, amount_base_units, resource, pay_to,
           network, asset, reason, status, expires_at, created_at)
         VALUES (?, NULL, ?, NULL, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
        approvalId,
        agentId,
        // The whole cents, rounded down, as the table's trigger requires.
        Number(r.amountBaseUnits / 10_000n),
        amount,
        r.resource,
        r.payTo,
        r.network,
        r.asset,
        reason,
        held.expiresAt,
        createdAt,
      ),
      outboxEvent("approval.required", null, data, createdAt),
      ...(slot ? storeResponseStatements(slot, 402, body) : []),
    ]);
  } catch (error) {
    if (guardReasonOf(error) === AGENT_FROZEN) return { kind: "frozen" };
    // The partial unique index (one pending approval per request): only a second object for the same
    // agent (during a restart) gets here; the approval it wrote is the one to answer.
    if (String(error).includes("UNIQUE constraint failed")) {
      const again = (await openX402Approvals(home.db, r)).find((a) => a.status === "pending");
      if (again) return heldAgain(again);
    }
    throw error;
  }
  return { ...held, body };
}

const expireStatement = (id: string, at: string) =>
  sqlStatement("UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'", at, id);

/**
 * The payment's plan using a granted approval: guarded that the approval is still granted, unexpired
 * and unused (or used by this very payment: a plan committed again after its batch landed is then
 * refused as already recorded, never as used), and marked used by the payment in the same batch.
 * The audit row names the approval and who granted it.
 */
export function usingApproval(plan: CommitPlan, approval: OpenX402Approval, paymentId: string, at: string): CommitPlan {
  const statements: SqlStatement[] = [
    guards([
      X402_APPROVAL_USED,
      `EXISTS (SELECT 1 FROM approvals WHERE id = ? AND status = 'granted' AND expires_at > ?
         AND (x402_payment_id IS NULL OR x402_payment_id = ?))`,
      approval.id,
      at,
      paymentId,
    ]),
    sqlStatement(
      "UPDATE approvals SET x402_payment_id = ? WHERE id = ? AND x402_payment_id IS NULL",
      paymentId,
      approval.id,
    ),
  ];
  const audit = plan.audit.map((row) => ({
    ...row,
    data: { ...row.data, approvalId: approval.id, approvedBy: approval.decidedBy },
  }));
  return { ...plan, statements: [...statements, ...plan.statements], audit };
}

/** An outbound approval granted: nothing moved. */
export interface X402Granted {
  kind: "granted";
  approvalId: string;
}

export const grantedBody = (approvalId: string) => ({ approval: { approvalId, status: "granted" } });

/**
 * Grants an outbound approval: it only flips to granted (guarded: still pending, unexpired, the agent
 * not frozen), with the keyed request's answer. It pays nothing: the agent's same request does.
 */
export async function grantX402Approval(
  { env, agentId, slot }: WalletCall,
  approvalId: string,
  decidedBy: string,
  now: number,
): Promise<X402Granted | { kind: "frozen" } | { kind: "conflict"; reason: "approval_not_pending" }> {
  const home = await placementOf(env).ofAgent(agentId);
  const at = nowIso(now);
  try {
    await executeBatch(home.db, [
      guards(agentNotFrozenCheck(agentId), [
        "approval_not_pending",
        "EXISTS (SELECT 1 FROM approvals WHERE id = ? AND status = 'pending' AND expires_at > ?)",
        approvalId,
        at,
      ]),
      sqlStatement(
        "UPDATE approvals SET status = 'granted', decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'",
        at,
        decidedBy,
        approvalId,
      ),
      ...(slot ? storeResponseStatements(slot, 200, JSON.stringify(grantedBody(approvalId))) : []),
    ]);
  } catch (error) {
    const reason = guardReasonOf(error);
    if (reason === AGENT_FROZEN) return { kind: "frozen" };
    if (reason === "approval_not_pending") return { kind: "conflict", reason };
    throw error;
  }
  return { kind: "granted", approvalId };
}
