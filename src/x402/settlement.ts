import type { ChargeRow } from "../charges/service";
import { chargeClaimedBy, reclaimForX402, releaseX402Claim } from "../charges/statements";
import type { Env, X402Settings } from "../config/env";
import { executeBatch, sqlStatement } from "../db/statements";
import { placeOfMadeId } from "../ledger/made-places";
import { x402PaymentPlan } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { nowIso } from "../lib/time";

/*
 * How a settlement ends, whoever learns it: the request that settled (service.ts) or the
 * reconciliation that asked the chain later (reconcile.ts). Kept apart from both so the
 * settler, which reconciles, never reaches back into the request path. A payment lives with the
 * charge it pays, in the charge's place (both ids carry it): every ending is written there, and the
 * credit commits there.
 */

/** Where a payment of this charge lives: the charge's place, which its id names. */
const placeOfCharge = (env: Env, chargeId: string) => placeOfMadeId(placementOf(env), chargeId);

/** Credits a settled transfer; idempotent, since the plan requires the payment to be still open. */
export async function credit(
  env: Env,
  x: X402Settings,
  charge: ChargeRow,
  paymentId: string,
  payer: string,
  transaction: string,
): Promise<boolean> {
  const result = await placeOfCharge(env, charge.id).commit(
    x402PaymentPlan({ charge, paymentId, network: x.network, payer, transaction, paidAt: nowIso() }),
  );
  return result.kind === "committed";
}

/** A definitive failure: the reservation is marked failed and the charge is open to other payments again. */
export async function release(
  env: Env,
  paymentId: string,
  chargeId: string,
  reason: string,
  at: string,
): Promise<void> {
  await executeBatch(placeOfCharge(env, chargeId).db, [
    sqlStatement(
      "UPDATE x402_payments SET status = 'failed', error = ?, updated_at = ? WHERE id = ? AND status IN ('settling', 'unknown')",
      reason.slice(0, 300),
      at,
      paymentId,
    ),
    releaseX402Claim(chargeId, paymentId),
  ]);
}

/**
 * A released payment whose authorization was used on chain after all (someone submitted it): it is
 * taken back for its charge while the charge is still open (pending, unclaimed), as `unknown` with
 * the claim, and reconciliation credits the transaction that used it. False when the charge was
 * paid or claimed meanwhile, or the payment is no longer released.
 */
export async function reopenReleased(env: Env, paymentId: string, chargeId: string): Promise<boolean> {
  const released = "EXISTS (SELECT 1 FROM x402_payments WHERE id = ? AND status = 'failed')";
  const [, reopened] = await executeBatch(placeOfCharge(env, chargeId).db, [
    reclaimForX402(chargeId, paymentId, released, paymentId),
    sqlStatement(
      `UPDATE x402_payments SET status = 'unknown', error = 'used after its release', updated_at = ?
       WHERE id = ? AND status = 'failed' AND ${chargeClaimedBy("?", "?")}`,
      nowIso(),
      paymentId,
      chargeId,
      paymentId,
    ),
  ]);
  return (reopened?.meta.changes ?? 0) > 0;
}
