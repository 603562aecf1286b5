import {
  type ApprovalRow,
  type ApprovalStatus,
  approvalsIn,
  expireOverdueApprovals,
  getApproval,
} from "../agents/approvals";
import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
import { centsIfWhole } from "../lib/money";

export const approvalView = (a: ApprovalRow) => ({
  approvalId: a.id,
  chargeId: a.chargeId,
  agentId: a.agentId,
  merchantId: a.merchantId,
  // Null when not whole cents, as a charge states it; only then is `amountBaseUnits` added, so an
  // approval in whole cents keeps exactly the fields it always had.
  amountMinor: centsIfWhole(BigInt(a.amountBaseUnits)),
  ...(centsIfWhole(BigInt(a.amountBaseUnits)) === null ? { amountBaseUnits: String(a.amountBaseUnits) } : {}),
  // An outbound x402 payment's approval names the one request it lets through, and the payment that used it.
  ...(a.chargeId === null ? { x402Payment: x402PaymentOf(a) } : {}),
  reason: a.reason,
  status: a.status,
  expiresAt: a.expiresAt,
  createdAt: a.createdAt,
});

const x402PaymentOf = (a: ApprovalRow) => ({
  resource: a.resource!,
  payTo: a.payTo!,
  network: a.network!,
  asset: a.asset!,
  paymentId: a.x402PaymentId,
});

export const APPROVAL_STATUSES = ["pending", "granted", "rejected", "expired"] as const satisfies ApprovalStatus[];

/** Every place's overdue approvals expired (approvals are held in their agent's home). */
export async function expireOverdueApprovalsEverywhere(env: Env, now = Date.now()): Promise<number> {
  const counts = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => expireOverdueApprovals(at.db, now)),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/** Newest first: with one place its list as before; with more, each place's first page merged by time. */
export async function listApprovals(env: Env, status: ApprovalStatus | undefined, limit: number) {
  const pages = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => approvalsIn(at.db, status, limit)),
  );
  if (pages.length === 1) return pages[0]!;
  // A stable sort keeps each place's own order among rows of one instant.
  return pages
    .flat()
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
    .slice(0, limit);
}

/**
 * The approval an id names, read in its agent's home (the id says which), with that home's
 * database; null for none, also for an id of a shard this deployment does not run (a 404, never a 500).
 */
export async function findApproval(env: Env, id: string): Promise<{ db: D1Database; approval: ApprovalRow } | null> {
  const at = placementOf(env).ofId(id);
  const approval = at ? await getApproval(at.db, id) : null;
  return at && approval ? { db: at.db, approval } : null;
}
