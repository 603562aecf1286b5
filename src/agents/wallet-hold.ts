import { chargeView } from "../charges/service";
import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { storeResponseStatements } from "../db/idempotency";
import { executeBatch, guard, guardReasonOf, guards, type SqlStatement, sqlStatement } from "../db/statements";
import { AGENT_FROZEN, agentNotFrozenCheck, payableChecks } from "../ledger/movements";
import { outboxEvent } from "../ledger/outbox";
import { type Place, placementOf } from "../ledger/place";
import { codeWith } from "../lib/error-codes";
import { newId } from "../lib/ids";
import { centsIfWhole } from "../lib/money";
import { nowIso } from "../lib/time";
import { heldBody, type PayOutcome } from "./outcomes";
import { commitPayment, decide } from "./wallet-payment";
import {
  APPROVAL_SELECT,
  type ApprovalSnapshot,
  type PayableSnapshot,
  readChargeState,
  type WalletCall,
  type WalletTurnCall,
} from "./wallet-state";
import { grantX402Approval, type X402Granted } from "./x402-approvals";

/** Why and when a payment is held: `existing` is this agent's pending approval of the charge, `prelude` runs first in the hold's batch. */
export interface HoldRequest {
  reason: string;
  existing: ApprovalSnapshot | undefined;
  now: number;
  prelude: SqlStatement[];
}

/**
 * Holds a payment for a human. Paying again while this agent's approval is
 * pending returns that same approval; an expired one is replaced. The hold's
 * batch re-checks that the charge is still payable, as a payment's does: the
 * charge was read before (another agent's wallet may pay it meanwhile), so a
 * hold never lands on a charge that is paid or being settled by x402.
 */
export async function requestApproval(
  { env, agentId, slot }: WalletCall,
  charge: PayableSnapshot,
  { reason, existing, now, prelude }: HoldRequest,
): Promise<PayOutcome> {
  const view = chargeView(charge);
  const createdAt = nowIso(now);
  const expireStale: SqlStatement[] = [];
  if (existing) {
    // This agent's own pending approval of the charge (one per charge and agent; another agent's is its own affair).
    if (existing.expiresAt > createdAt)
      return {
        kind: "approval",
        approvalId: existing.id,
        reason: existing.reason,
        expiresAt: existing.expiresAt,
        charge: view,
      };
    expireStale.push(
      sqlStatement(
        "UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'",
        createdAt,
        existing.id,
      ),
    );
  }
  // Held on the agent's side, its home; the charge may live elsewhere (its merchant's home).
  const place = placementOf(env);
  const home = await place.ofAgent(agentId);
  const approvalId = newId("approval", home);
  const held = { approvalId, reason, expiresAt: nowIso(now + settingsOf(env).approvalTtlMs), charge: view };
  const hold: Hold = { agentId, charge, held, createdAt, prelude, expireStale };
  try {
    await writeHold(env, hold, home, slot ? storeResponseStatements(slot, 402, JSON.stringify(heldBody(held))) : []);
  } catch (error) {
    const message = String(error);
    // The partial unique index (one pending approval per charge and agent): this agent's wallet object
    // decides one operation at a time, so only a second object for the same agent (during a restart) gets here.
    if (message.includes("UNIQUE constraint failed")) return { kind: "conflict", reason: "charge_awaiting_approval" };
    const guarded = guardReasonOf(error);
    if (guarded === AGENT_FROZEN) return { kind: "frozen" };
    if (guarded) return { kind: "conflict", reason: codeWith(409, guarded) };
    throw error;
  }
  return { kind: "approval", ...held };
}

/** A hold to write: the approval (`held`), the statements that create its charge first, and the stale approval it replaces. */
interface Hold {
  agentId: string;
  charge: PayableSnapshot;
  held: { approvalId: string; reason: string; expiresAt: string };
  createdAt: string;
  prelude: SqlStatement[];
  expireStale: SqlStatement[];
}

/**
 * Writes a hold in the agent's home, with `answer` (its 402 under the request's key): the pending
 * approval, its `approval.required` event, and the charge's guards. A charge born with its hold in
 * another place (a checkout link's) is created there first, in its own batch with its link's guard;
 * a hold refused after that leaves it pending, payable.
 */
async function writeHold(env: Env, h: Hold, home: Place, answer: SqlStatement[]): Promise<void> {
  const { agentId, charge, held } = h;
  const at = placementOf(env).ofId(charge.id);
  const together = at === home;
  if (!together && h.prelude.length > 0) await executeBatch(at!.db, [...h.prelude, guards(...payableChecks(charge))]);
  const { approvalId, reason, expiresAt } = held;
  const data = {
    approvalId,
    reason,
    expiresAt,
    chargeId: charge.id,
    agentId,
    merchantId: charge.merchantId,
    // As a charge states it: null when not whole cents, amountBaseUnits exact.
    amountMinor: centsIfWhole(BigInt(charge.amountBaseUnits)),
    amountBaseUnits: String(charge.amountBaseUnits),
  };
  await executeBatch(home.db, [
    ...(together ? h.prelude : []),
    // After the prelude, so a charge born in this batch is checked as created. Apart, the charge was
    // read payable before the turn, and the grant's payment guards it again.
    guards(agentNotFrozenCheck(agentId), ...(together ? payableChecks(charge) : [])),
    ...h.expireStale,
    sqlStatement(
      `INSERT INTO approvals (id, charge_id, agent_id, merchant_id, amount_minor, amount_base_units, reason, status, expires_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
      approvalId,
      charge.id,
      agentId,
      charge.merchantId,
      charge.amountMinor,
      charge.amountBaseUnits,
      reason,
      expiresAt,
      h.createdAt,
    ),
    outboxEvent("approval.required", charge.merchantId, data, h.createdAt),
    ...answer,
  ]);
}

/**
 * Grants a held payment: the approval flips to granted in the same batch that
 * pays the charge. Hard limits and the balance still apply; if they no longer
 * allow it the approval stays pending (402). As every payment of a charge born
 * from a checkout link, it is paid only while the link is active (409
 * `checkout_link_disabled`, the approval stays pending).
 */
export async function grantApproval(
  call: WalletTurnCall,
  approvalId: string,
  decidedBy: string,
): Promise<PayOutcome | X402Granted> {
  const { env, agentId, turn } = call;
  // This reads the agent from D1: only once every payment of the agent in flight has committed or failed.
  await turn.cache.settled();
  const now = Date.now();
  const place = placementOf(env);
  const approval = ((await place
    .ofId(approvalId)
    ?.db.prepare(`${APPROVAL_SELECT} WHERE id = ?`)
    .bind(approvalId)
    .first()) ?? null) as ApprovalSnapshot | null;
  if (!approval || approval.agentId !== agentId) return { kind: "not_found", reason: "approval_not_found" };
  const closed = await checkApprovalOpen(env, approval, now);
  if (closed) return closed;
  // An outbound x402 payment's approval holds no charge: granting it pays nothing (the agent's same request does).
  if (approval.chargeId === null) return grantX402Approval(call, approvalId, decidedBy, now);
  const { charge, agent } = await readChargeState(env, agentId, approval.chargeId, now);
  if (!charge || !agent) return { kind: "not_found", reason: "charge_not_found" };
  if (charge.status !== "pending") {
    // Where the charge and the approval live together, the batch that paid the charge expired its
    // pending approvals; apart, that batch could not reach this one, held on the agent's home: it is
    // expired now, as it would be.
    if (place.ofId(charge.id) !== place.ofId(approvalId)) {
      await expireApproval(env, approvalId, nowIso(now));
      return { kind: "conflict", reason: "approval_not_pending" };
    }
    return { kind: "conflict", reason: "charge_not_pending" };
  }
  const decision = decide(agent, charge, true);
  if (decision.kind === "frozen") return { kind: "frozen" };
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  const decidedAt = nowIso(now);
  return commitPayment(call, charge, {
    view: { kind: "approval", approvalId },
    // On the agent's side: across shards, in the send, so a refused send leaves the approval pending.
    payerStatements: [
      guard(
        "approval_not_pending",
        "EXISTS (SELECT 1 FROM approvals WHERE id = ? AND status = 'pending' AND expires_at > ?)",
        approvalId,
        decidedAt,
      ),
      sqlStatement(
        "UPDATE approvals SET status = 'granted', decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'",
        decidedAt,
        decidedBy,
        approvalId,
      ),
    ],
    auditData: { approvalId, approvedBy: decidedBy },
    afterReversal: (reason) => reopenAfterReversal(env, approvalId, decidedAt, reason),
  });
}

/**
 * A payment that crossed shards flipped the approval to granted in its send; when the charge's side
 * then refused it (paid by someone else meanwhile, its link disabled) and the money came back, the
 * approval is left as a refusal within one shard leaves it: expired when the charge was paid by
 * another, else pending.
 */
async function reopenAfterReversal(env: Env, approvalId: string, decidedAt: string, reason: string) {
  const paidElsewhere = reason === "charge_not_pending";
  await approvalsDb(env, approvalId)
    .prepare(
      `UPDATE approvals SET status = ?, decided_at = ?, decided_by = NULL
       WHERE id = ? AND status = 'granted' AND decided_at = ?`,
    )
    .bind(paidElsewhere ? "expired" : "pending", paidElsewhere ? decidedAt : null, approvalId, decidedAt)
    .run();
}

/** Null when the approval can still be decided; otherwise the conflict, marking an overdue one expired. */
export async function checkApprovalOpen(
  env: Env,
  approval: { id: string; status: string; expiresAt: string },
  now: number,
): Promise<PayOutcome | null> {
  if (approval.status !== "pending") return { kind: "conflict", reason: "approval_not_pending" };
  const at = nowIso(now);
  if (approval.expiresAt <= at) {
    await expireApproval(env, approval.id, at);
    return { kind: "conflict", reason: "approval_expired" };
  }
  return null;
}

/** The database of the approval `id` names: its agent's home. */
function approvalsDb(env: Env, id: string): D1Database {
  const at = placementOf(env).ofId(id);
  if (!at) throw new Error(`approval ${id} lives in a shard this deployment does not run`);
  return at.db;
}

const expireApproval = (env: Env, id: string, at: string) =>
  approvalsDb(env, id)
    .prepare("UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'")
    .bind(at, id)
    .run();
