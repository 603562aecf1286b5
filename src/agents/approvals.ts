import type { approvals } from "../db/schema";
import { type SqlStatement, sqlStatement } from "../db/statements";
import { nowIso } from "../lib/time";

/*
 * The approvals table's statements outside the wallet object: the wallet holds, grants and expires
 * an agent's approvals in its turn (wallet-hold.ts); the console lists them, reads one, rejects one
 * and expires the overdue ones in each place, through these.
 */

export type ApprovalRow = typeof approvals.$inferSelect;

/** An approval's columns named as in ApprovalRow. */
const APPROVAL_ROW = `SELECT id, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId,
  amount_minor AS amountMinor, amount_base_units AS amountBaseUnits, resource, pay_to AS payTo, network, asset,
  x402_payment_id AS x402PaymentId, reason, status, expires_at AS expiresAt, created_at AS createdAt,
  decided_at AS decidedAt, decided_by AS decidedBy FROM approvals`;

export type ApprovalStatus = "pending" | "granted" | "rejected" | "expired";

/** Marks every pending approval past its expiry as expired. Idempotent; run by the cron and before listing. */
export async function expireOverdueApprovals(db: D1Database, now = Date.now()): Promise<number> {
  const at = nowIso(now);
  const result = await db
    .prepare("UPDATE approvals SET status = 'expired', decided_at = ? WHERE status = 'pending' AND expires_at <= ?")
    .bind(at, at)
    .run();
  return result.meta.changes;
}

/** The newest `limit` approvals of one database, of one status or all; the overdue ones expired first. */
export async function approvalsIn(
  db: D1Database,
  status: ApprovalStatus | undefined,
  limit: number,
): Promise<ApprovalRow[]> {
  await expireOverdueApprovals(db);
  const rows = await (status
    ? db.prepare(`${APPROVAL_ROW} WHERE status = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`).bind(status, limit)
    : db.prepare(`${APPROVAL_ROW} ORDER BY created_at DESC, rowid DESC LIMIT ?`).bind(limit)
  ).all<ApprovalRow>();
  return rows.results;
}

export const getApproval = (db: D1Database, id: string) =>
  db.prepare(`${APPROVAL_ROW} WHERE id = ?`).bind(id).first<ApprovalRow>();

/** Rejects a pending, unexpired approval; a charge it held stays pending. False if it could not be decided. */
export async function rejectApproval(
  db: D1Database,
  id: string,
  decidedBy: string,
  now = Date.now(),
): Promise<boolean> {
  const at = nowIso(now);
  const result = await db
    .prepare(
      "UPDATE approvals SET status = 'rejected', decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending' AND expires_at > ?",
    )
    .bind(at, decidedBy, id, at)
    .run();
  return result.meta.changes > 0;
}

/** How many approvals wait for a decision and have not expired at `at` (the console's overview, in its batch). */
export const pendingApprovalCount = (at: string): SqlStatement =>
  sqlStatement("SELECT COUNT(*) AS n FROM approvals WHERE status = 'pending' AND expires_at > ?", at);
