import { getAddress } from "viem";
import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
import { type ReceivingRow, receivingAddressStatement } from "./receiving";

/*
 * Reads of a merchant's own x402 routes for the console, which only looks: nothing here assigns an
 * address or writes a row.
 */

/**
 * The merchant's facilitator `payTo`, or null while it has none: the address is assigned on the
 * merchant's first `GET /merchant/x402/facilitator`, never by a read.
 */
export async function assignedPayTo(env: Env, merchantId: string): Promise<`0x${string}` | null> {
  const row = await receivingAddressStatement(placementOf(env).control.db, merchantId).first<ReceivingRow>();
  return row?.address ? getAddress(row.address) : null;
}

/**
 * Who paid each of these charges through x402 (the authorization's `from`), by charge id; `d1` is
 * where the charges live (their merchant's home, where their payments are reserved).
 */
export async function payersOfCharges(d1: D1Database, chargeIds: string[]): Promise<Map<string, string>> {
  if (chargeIds.length === 0) return new Map();
  const { results } = await d1
    .prepare(
      `SELECT charge_id AS chargeId, payer FROM x402_payments
       WHERE charge_id IN (SELECT value FROM json_each(?)) AND status = 'settled'`,
    )
    .bind(JSON.stringify(chargeIds))
    .all<{ chargeId: string; payer: string }>();
  return new Map(results.map((r) => [r.chargeId, getAddress(r.payer)]));
}
