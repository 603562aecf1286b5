import type { Env } from "../config/env";
import type { charges } from "../db/schema";
import { executeBatch, nothingMore, type SqlStatement, sqlStatement, type WithCreated } from "../db/statements";
import { outboxEvent } from "../ledger/outbox";
import { type Place, placementOf } from "../ledger/place";
import { type IdPlace, newId } from "../lib/ids";
import { mergeSorted, newestFirst } from "../lib/merge";
import { baseUnitsParam, centsIfWhole, centsToUsdcUnits, wholeCentsOf } from "../lib/money";
import { nowIso } from "../lib/time";
import { CHARGE_ROW_COLUMNS } from "./statements";

export type ChargeRow = typeof charges.$inferSelect;

/** The fields of a charge the API shows. */
export type ChargeFields = Omit<ChargeRow, "checkoutLinkId" | "paylinkGrantId" | "x402Claim" | "facilitated">;

/** The spec's charge object. */
export const chargeView = (c: ChargeFields) => ({
  chargeId: c.id,
  merchantId: c.merchantId,
  agentId: c.agentId,
  amountMinor: centsIfWhole(BigInt(c.amountBaseUnits)),
  amountBaseUnits: String(c.amountBaseUnits),
  currency: c.currency,
  description: c.description,
  externalId: c.externalId,
  status: c.status,
  method: c.method,
  reference: c.reference,
  createdAt: c.createdAt,
  paidAt: c.paidAt,
  refundedMinor: c.refundedMinor,
  refundedBaseUnits: String(c.refundedBaseUnits),
  // Only a charge paid through the service as a merchant's own x402 facilitator has one: every other
  // charge keeps exactly the fields it always had.
  ...(c.resource ? { resource: c.resource } : {}),
});

export type ChargeView = ReturnType<typeof chargeView>;

/** A charge that does not exist yet, pending, in memory; `at` is where it will live (its merchant's home). */
export function newPendingCharge(
  at: IdPlace,
  merchantId: string,
  input: ({ amountMinor: number } | { amountBaseUnits: bigint }) & {
    description?: string | null | undefined;
    externalId?: string | null | undefined;
    checkoutLinkId?: string | null;
    paylinkGrantId?: string | null;
    x402Claim?: string | null;
    resource?: string | null;
    /** Made by a settlement through the service as the merchant's facilitator: no other payment may pay it. */
    facilitated?: boolean;
  },
  createdAt = nowIso(),
): ChargeRow {
  const amount = "amountBaseUnits" in input ? input.amountBaseUnits : centsToUsdcUnits(input.amountMinor);
  return {
    id: newId("charge", at),
    merchantId,
    agentId: null,
    amountMinor: wholeCentsOf(amount),
    amountBaseUnits: baseUnitsParam(amount),
    currency: "USD",
    description: input.description ?? null,
    externalId: input.externalId ?? null,
    status: "pending",
    method: null,
    reference: null,
    createdAt,
    paidAt: null,
    checkoutLinkId: input.checkoutLinkId ?? null,
    paylinkGrantId: input.paylinkGrantId ?? null,
    x402Claim: input.x402Claim ?? null,
    refundedMinor: 0,
    refundedBaseUnits: 0,
    resource: input.resource ?? null,
    facilitated: input.facilitated ? 1 : 0,
  };
}

/**
 * The statements that create a pending charge and its `charge.created` event.
 * Callers put them in the same batch as whatever else the charge's birth needs.
 */
export function chargeCreationStatements(row: ChargeRow, merchantName: string): SqlStatement[] {
  return [
    sqlStatement(
      `INSERT INTO charges (id, merchant_id, agent_id, amount_minor, amount_base_units, currency, description, external_id, status, method, reference, created_at, paid_at, checkout_link_id, paylink_grant_id, x402_claim, resource, facilitated)
       VALUES (?, ?, NULL, ?, ?, ?, ?, ?, 'pending', NULL, NULL, ?, NULL, ?, ?, ?, ?, ?)`,
      row.id,
      row.merchantId,
      row.amountMinor,
      row.amountBaseUnits,
      row.currency,
      row.description,
      row.externalId,
      row.createdAt,
      row.checkoutLinkId,
      row.paylinkGrantId,
      row.x402Claim,
      row.resource,
      row.facilitated,
    ),
    outboxEvent(
      "charge.created",
      row.merchantId,
      {
        chargeId: row.id,
        amountMinor: centsIfWhole(BigInt(row.amountBaseUnits)),
        amountBaseUnits: String(row.amountBaseUnits),
        merchantName,
        merchantId: row.merchantId,
      },
      row.createdAt,
    ),
  ];
}

/**
 * A new pending charge and its `charge.created` event, written together in `home`, the merchant's
 * home (the charge's id names it).
 */
export async function createCharge(
  home: Place,
  merchant: { id: string; name: string },
  input: { amountMinor: number; description?: string | undefined; externalId?: string | undefined },
  withCreated: WithCreated<ChargeRow> = nothingMore,
): Promise<ChargeRow> {
  const row = newPendingCharge(home, merchant.id, input);
  await executeBatch(home.db, [...chargeCreationStatements(row, merchant.name), ...(await withCreated(row))]);
  return row;
}

/** The charge, or undefined for no such charge in `d1`. */
export const getCharge = async (d1: D1Database, id: string) =>
  (await chargeRowStatement(d1, id).first<ChargeRow>()) ?? undefined;

/** `getCharge` as one raw statement, for a caller that batches it with its own reads; its row is a ChargeRow. */
export const chargeRowStatement = (d1: D1Database, id: string) =>
  d1.prepare(`SELECT ${CHARGE_ROW_COLUMNS} FROM charges c WHERE c.id = ?`).bind(id);

/** The merchant's last `limit` charges, newest first. */
export async function listMerchantCharges(d1: D1Database, merchantId: string, limit = 100) {
  const { results } = await d1
    .prepare(
      `SELECT ${CHARGE_ROW_COLUMNS} FROM charges c WHERE c.merchant_id = ? ORDER BY c.created_at DESC, c.rowid DESC LIMIT ?`,
    )
    .bind(merchantId, limit)
    .all<ChargeRow>();
  return results;
}

/**
 * The merchant's payments through the service as its own x402 facilitator (paid charges with a
 * `resource`), most recently paid first; `d1` is the merchant's home.
 */
export async function listMerchantResourcePayments(d1: D1Database, merchantId: string, limit: number) {
  const { results } = await d1
    .prepare(
      `SELECT ${CHARGE_ROW_COLUMNS} FROM charges c
       WHERE c.merchant_id = ? AND c.resource IS NOT NULL AND c.status = 'paid'
       ORDER BY c.paid_at DESC, c.rowid DESC LIMIT ?`,
    )
    .bind(merchantId, limit)
    .all<ChargeRow>();
  return results;
}

/**
 * The agent's paid charges (wallet, checkout link and PayLink payments), most recently paid first.
 * A charge lives in its merchant's shard, so an agent's are in any of them: each shard's first page, merged.
 */
export async function listAgentPayments(env: Env, agentId: string, limit: number) {
  const pages = await Promise.all(
    placementOf(env)
      .each()
      .map(async (at) => {
        const { results } = await at.db
          .prepare(
            `SELECT ${CHARGE_ROW_COLUMNS} FROM charges c WHERE c.agent_id = ? AND c.status = 'paid'
             ORDER BY c.paid_at DESC, c.rowid DESC LIMIT ?`,
          )
          .bind(agentId, limit)
          .all<ChargeRow>();
        return results;
      }),
  );
  return mergeSorted(
    pages,
    newestFirst((c) => c.paidAt),
    limit,
  );
}

/**
 * The agent's charges, most recently paid first, as the console's agent page lists them
 * (every status; a charge not paid yet sorts last).
 */
export async function listAgentChargesByPaidAt(env: Env, agentId: string, limit: number) {
  // A charge lives in its merchant's shard, so an agent's are in any of them: each shard's first page, merged.
  const pages = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => agentChargesIn(at.db, agentId, limit)),
  );
  return mergeSorted(
    pages,
    newestFirst((c: ChargeFields) => c.paidAt),
    limit,
  );
}

/** One shard's page of the agent's charges, most recently paid first. */
async function agentChargesIn(d1: D1Database, agentId: string, limit: number) {
  const { results } = await d1
    .prepare(
      `SELECT id, merchant_id AS merchantId, agent_id AS agentId, amount_minor AS amountMinor, amount_base_units AS amountBaseUnits, currency, description, external_id AS externalId,
       status, method, reference, created_at AS createdAt, paid_at AS paidAt, refunded_minor AS refundedMinor,
       refunded_base_units AS refundedBaseUnits, resource
       FROM charges WHERE agent_id = ? ORDER BY paid_at DESC LIMIT ?`,
    )
    .bind(agentId, limit)
    .all<ChargeFields>();
  return results;
}
