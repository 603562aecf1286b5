import { and, desc, eq, sql } from "drizzle-orm";
import { dbOf, type Db } from "../db/client";
import { dbOfShard, shardOfId } from "../db/shards";
import type { Env } from "../config/env";
import { forEachShard } from "../ledger/shards";
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

/** Every shard's overdue approvals expired (approvals are held on their agent's home shard). */
export async function expireOverdueApprovalsEverywhere(env: Env, now = Date.now()): Promise<number> {
  const counts = await forEachShard(env, (db) => expireOverdueApprovals(dbOf(db), now));
  return counts.reduce((a, b) => a + b, 0);
}

const listIn = async (db: Db, status: (typeof APPROVAL_STATUSES)[number] | undefined, limit: number) => {
  await expireOverdueApprovals(db);
  const query = db.select().from(approvals);
  const filtered = status ? query.where(eq(approvals.status, status)) : query;
  return filtered.orderBy(desc(approvals.createdAt), desc(sql`rowid`)).limit(limit).all();
};

/** Newest first: with one shard its list as before; with more, each shard's first page merged by time. */
export async function listApprovals(env: Env, status: (typeof APPROVAL_STATUSES)[number] | undefined, limit: number) {
  const pages = await forEachShard(env, (db) => listIn(dbOf(db), status, limit));
  if (pages.length === 1) return pages[0]!;
  // A stable sort keeps each shard's own order among rows of one instant.
  return pages
    .flat()
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
    .slice(0, limit);
}

/** The database of the shard an approval's id names: its agent's home. */
export const dbOfApproval = (env: Env, id: string): Db => dbOf(dbOfShard(env, shardOfId(id)));

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
