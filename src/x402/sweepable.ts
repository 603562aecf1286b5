import type { Hex } from "viem";
import type { Env, X402Settings } from "../config/env";
import { type Place, placementOf } from "../ledger/place";

/** A settled x402 payment a sweep may take from its receiving address, with the key that signs it. */
export interface SweepablePayment {
  ownerId: string;
  from: Hex;
  /** `receiving:<index>`: how the receiving address's key is derived. */
  signer: string;
  /** Token base units, as a decimal string. */
  value: string;
}

/**
 * Settled x402 payments in `at` of at least `minValue` base units that landed on a charge's or
 * link's receiving address, and not `unless` (an SQL condition over the payment's id, which the
 * caller makes: a sweep of it was written, say), oldest first. A payment to the settlement address
 * itself (no `pay_to`, or `pay_to` it) is already where sweeps take money, and joins no receiving
 * address. Receiving addresses are allocated in control: control joins them in one query; any other
 * place reads its payments first, then their addresses' keys from control.
 */
export async function sweepablePayments(
  env: Env,
  x: X402Settings,
  at: Place,
  minValue: number,
  limit: number,
  unless: (paymentId: string) => string,
): Promise<SweepablePayment[]> {
  const control = placementOf(env).control.db;
  const binds = [x.network, x.asset.toLowerCase(), minValue, x.payTo.toLowerCase(), limit];
  if (at.isControl)
    return (
      await control
        .prepare(
          `SELECT p.id AS ownerId, r.address AS "from", 'receiving:' || r.idx AS signer, p.value
     FROM x402_payments p JOIN receiving_addresses r ON r.address = p.pay_to
     WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?
       AND CAST(p.value AS INTEGER) >= ? AND p.pay_to <> ? AND NOT ${unless("p.id")}
     ORDER BY p.updated_at, p.id LIMIT ?`,
        )
        .bind(...binds)
        .all<SweepablePayment>()
    ).results;
  const payments = await at.db
    .prepare(
      `SELECT p.id AS ownerId, p.pay_to AS payTo, p.value FROM x402_payments p
       WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?
         AND CAST(p.value AS INTEGER) >= ? AND p.pay_to <> ? AND NOT ${unless("p.id")}
       ORDER BY p.updated_at, p.id LIMIT ?`,
    )
    .bind(...binds)
    .all<{ ownerId: string; payTo: string; value: string }>();
  if (payments.results.length === 0) return [];
  const addresses = await control
    .prepare("SELECT idx, address FROM receiving_addresses WHERE address IN (SELECT value FROM json_each(?))")
    .bind(JSON.stringify([...new Set(payments.results.map((p) => p.payTo))]))
    .all<{ idx: number; address: string }>();
  const indexOf = new Map(addresses.results.map((a) => [a.address, a.idx]));
  return payments.results.flatMap((p) => {
    const idx = indexOf.get(p.payTo);
    return idx === undefined
      ? []
      : [{ ownerId: p.ownerId, from: p.payTo as Hex, signer: `receiving:${idx}`, value: p.value }];
  });
}

/** True when an x402 payment names the transaction `txHash` (an SQL expression, lowercase). */
export const paymentOfTransaction = (txHash: string) =>
  `EXISTS (SELECT 1 FROM x402_payments WHERE lower(tx_hash) = ${txHash})`;
