import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { approvals } from "../db/schema";
import { nowIso } from "../lib/time";

export type ApprovalRow = typeof approvals.$inferSelect;

export const approvalView = (a: ApprovalRow) => ({
  approvalId: a.id,
  chargeId: a.chargeId,
  agentId: a.agentId,
  merchantId: a.merchantId,
  amountMinor: a.amountMinor,
  reason: a.reason,
  status: a.status,
  expiresAt: a.expiresAt,
  createdAt: a.createdAt,
});

export const APPROVAL_STATUSES = ["pending", "granted", "rejected", "expired"] as const;

/** Marks every pending approval past its expiry as expired. Idempotent; run by the cron and before listing. */
export async function expireOverdueApprovals(db: Db, now = Date.now()): Promise<number> {
  const at = nowIso(now);
  const result = await db
    .update(approvals)
    .set({ status: "expired", decidedAt: at })
    .where(and(eq(approvals.status, "pending"), sql`${approvals.expiresAt} <= ${at}`))
    .run();
  return result.meta.changes;
}

export async function listApprovals(db: Db, status: (typeof APPROVAL_STATUSES)[number] | undefined, limit: number) {
  await expireOverdueApprovals(db);
  const query = db.select().from(approvals);
  const filtered = status ? query.where(eq(approvals.status, status)) : query;
  return filtered.orderBy(desc(approvals.createdAt), desc(sql`rowid`)).limit(limit).all();
}

export const getApproval = (db: Db, id: string) => db.select().from(approvals).where(eq(approvals.id, id)).get();

/** Rejects a pending, unexpired approval; the charge stays pending. False if it could not be decided. */
export async function rejectApproval(db: Db, id: string, decidedBy: string, now = Date.now()): Promise<boolean> {
  const at = nowIso(now);
  const result = await db
    .update(approvals)
    .set({ status: "rejected", decidedAt: at, decidedBy })
    .where(and(eq(approvals.id, id), eq(approvals.status, "pending"), sql`${approvals.expiresAt} > ${at}`))
    .run();
  return result.meta.changes > 0;
}
