import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { executeBatch } from "../db/batch";
import { charges } from "../db/schema";
import { sqlStatement } from "../ledger/plan";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import { outboxEvent } from "../webhooks/outbox";

export type ChargeRow = typeof charges.$inferSelect;

/** The spec's charge object. */
export const chargeView = (c: ChargeRow) => ({
  chargeId: c.id,
  merchantId: c.merchantId,
  agentId: c.agentId,
  amountMinor: c.amountMinor,
  currency: c.currency,
  description: c.description,
  externalId: c.externalId,
  status: c.status,
  method: c.method,
  reference: c.reference,
  createdAt: c.createdAt,
  paidAt: c.paidAt,
});

export type ChargeView = ReturnType<typeof chargeView>;

/** A new pending charge and its `charge.created` event, written together. */
export async function createCharge(
  d1: D1Database,
  merchant: { id: string; name: string },
  input: { amountMinor: number; description?: string | undefined; externalId?: string | undefined },
): Promise<ChargeRow> {
  const row: ChargeRow = {
    id: newId("charge"),
    merchantId: merchant.id,
    agentId: null,
    amountMinor: input.amountMinor,
    currency: "USD",
    description: input.description ?? null,
    externalId: input.externalId ?? null,
    status: "pending",
    method: null,
    reference: null,
    createdAt: nowIso(),
    paidAt: null,
  };
  await executeBatch(d1, [
    sqlStatement(
      `INSERT INTO charges (id, merchant_id, agent_id, amount_minor, currency, description, external_id, status, method, reference, created_at, paid_at)
       VALUES (?, ?, NULL, ?, ?, ?, ?, 'pending', NULL, NULL, ?, NULL)`,
      row.id, row.merchantId, row.amountMinor, row.currency, row.description, row.externalId, row.createdAt,
    ),
    outboxEvent("charge.created", merchant.id, { chargeId: row.id, amountMinor: row.amountMinor, merchantName: merchant.name, merchantId: merchant.id }, row.createdAt),
  ]);
  return row;
}

export const getCharge = (db: Db, id: string) => db.select().from(charges).where(eq(charges.id, id)).get();

export const getMerchantCharge = (db: Db, merchantId: string, id: string) =>
  db.select().from(charges).where(and(eq(charges.id, id), eq(charges.merchantId, merchantId))).get();

/** The merchant's last `limit` charges, newest first. */
export const listMerchantCharges = (db: Db, merchantId: string, limit = 100) =>
  db.select().from(charges).where(eq(charges.merchantId, merchantId)).orderBy(desc(charges.createdAt), desc(sql`rowid`)).limit(limit).all();
