import { pendingApprovalCount } from "../../agents/approvals";
import { agentCount } from "../../agents/service";
import type { ChargeRow } from "../../charges/service";
import {
  chargesCreatedSince,
  chargeWithMerchantName,
  paidByHourSince,
  paidTotalsSince,
} from "../../charges/statements";
import type { Env } from "../../config/env";
import { executeBatch, prepared, sqlStatement } from "../../db/statements";
import { placementOf } from "../../ledger/place";
import { nowIso, utcDayStart } from "../../lib/time";
import { MERCHANT_COUNT } from "../../merchants/statements";
import { payoutTotalsByStatus } from "../../payouts/reads";
import type { PayoutRow } from "../../payouts/service";

/** The overview's figures for today (UTC). */
export interface Overview {
  paid: { n: number; cents: number };
  /** Paid cents by UTC hour of today, 24 entries. */
  paidCentsByHour: number[];
  createdToday: number;
  pendingApprovals: number;
  merchants: number;
  agents: number;
}

/** The overview's figures, read in one batch so they agree with each other. Console-only reporting across domains. */
export async function readOverview(db: D1Database): Promise<Overview> {
  const dayStart = utcDayStart();
  const [totals, byHour, pending, counts, agents] = await executeBatch(db, [
    paidTotalsSince(dayStart),
    paidByHourSince(dayStart),
    pendingApprovalCount(nowIso()),
    sqlStatement(`SELECT ${MERCHANT_COUNT} AS merchants, ${chargesCreatedSince("?")} AS created`, dayStart),
    agentCount(),
  ]);
  const paid = totals!.results[0] as { n: number; cents: number };
  const paidCentsByHour = Array<number>(24).fill(0);
  for (const row of byHour!.results as { hour: number; cents: number }[]) paidCentsByHour[row.hour] = row.cents;
  const k = counts!.results[0] as { merchants: number; created: number };
  return {
    paid,
    paidCentsByHour,
    createdToday: k.created,
    pendingApprovals: (pending!.results[0] as { n: number }).n,
    merchants: k.merchants,
    agents: (agents!.results[0] as { n: number }).n,
  };
}

/**
 * The overview over every ledger shard: each shard's figures read in one batch (so they agree with
 * each other), then summed, hour by hour for the paid cents. The merchant and agent counts are the
 * control database's alone: a shard k ≥ 1 holds account rows of owners whose identity is in control.
 * The sum is not one snapshot: shards are read at about the same time, not in one transaction.
 */
export async function readOverviewOfShards(env: Env): Promise<Overview> {
  const [control, ...others] = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => readOverview(at.db)),
  );
  const total = { ...control!, paid: { ...control!.paid }, paidCentsByHour: [...control!.paidCentsByHour] };
  for (const o of others) {
    total.paid.n += o.paid.n;
    total.paid.cents += o.paid.cents;
    o.paidCentsByHour.forEach((cents, hour) => {
      total.paidCentsByHour[hour]! += cents;
    });
    total.createdToday += o.createdToday;
    total.pendingApprovals += o.pendingApprovals;
  }
  return total;
}

/** A payout's states, in the order of its life. */
export const PAYOUT_STATUSES = ["pending", "paid", "failed"] as const satisfies readonly PayoutRow["status"][];
export type PayoutStatus = (typeof PAYOUT_STATUSES)[number];

/**
 * Every merchant's payouts counted and summed by status (cents), over every ledger shard (a payout
 * lives in its merchant's); a status without payouts reads zero.
 */
export async function readPayoutTotals(env: Env): Promise<Record<PayoutStatus, { n: number; cents: number }>> {
  const shards = await Promise.all(
    placementOf(env)
      .each()
      .map((at) => payoutTotalsByStatus(at.db)),
  );
  const totals = { pending: { n: 0, cents: 0 }, paid: { n: 0, cents: 0 }, failed: { n: 0, cents: 0 } };
  for (const rows of shards)
    for (const row of rows)
      if (row.status in totals) {
        totals[row.status as PayoutStatus].n += row.n;
        totals[row.status as PayoutStatus].cents += row.cents;
      }
  return totals;
}

/**
 * A charge and its merchant's name, in one query on the charge's shard (its id names it; the merchant's
 * account row there has the name); null for an unknown charge.
 */
export async function readChargeWithMerchant(
  env: Env,
  chargeId: string,
): Promise<{ charge: ChargeRow; merchantName: string | null } | null> {
  const at = placementOf(env).ofId(chargeId);
  // An id tagged with a shard this deployment does not run names no charge here.
  if (!at) return null;
  const row = await prepared(at.db, chargeWithMerchantName(chargeId)).first<
    ChargeRow & { merchantName: string | null }
  >();
  if (!row) return null;
  const { merchantName, ...charge } = row;
  return { charge, merchantName };
}
