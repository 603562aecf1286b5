import { and, desc, eq, sql } from "drizzle-orm";
import { dbOf, type Db } from "../db/client";
import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
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

/** Every place's overdue approvals expired (approvals are held in their agent's home). */
export async function expireOverdueApprovalsEverywhere(env: Env, now = Date.now()): Promise<number> {
  const counts = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => expireOverdueApprovals(dbOf(at.db), now)),
  );
  return counts.reduce((a, b) => a + b, 0);
}

const listIn = async (db: Db, status: (typeof APPROVAL_STATUSES)[number] | undefined, limit: number) => {
  await expireOverdueApprovals(db);
  const query = db.select().from(approvals);
  const filtered = status ? query.where(eq(approvals.status, status)) : query;
  return filtered.orderBy(desc(approvals.createdAt), desc(sql`rowid`)).limit(limit).all();
};

/** Newest first: with one place its list as before; with more, each place's first page merged by time. */
export async function listApprovals(env: Env, status: (typeof APPROVAL_STATUSES)[number] | undefined, limit: number) {
  const pages = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => listIn(dbOf(at.db), status, limit)),
  );
  if (pages.length === 1) return pages[0]!;
  // A stable sort keeps each place's own order among rows of one instant.
  return pages
    .flat()
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
    .slice(0, limit);
}

/** The database an approval's id names: its agent's home. */
export function dbOfApproval(env: Env, id: string): Db {
  const at = placementOf(env).ofId(id);
  if (!at) throw new Error(`approval ${id} lives in a shard this deployment does not run`);
  return dbOf(at.db);
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
