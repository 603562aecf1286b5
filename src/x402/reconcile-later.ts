import type { Env } from "../config/env";
import { placeOfMadeId } from "../ledger/made-places";
import { placementOf } from "../ledger/place";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { settlerOf } from "./settler.do";

/**
 * Marks a settlement whose outcome the chain must decide (kept claimed, with the transaction if one
 * is known) and has the settler watch it, so an alarm reconciles it soon.
 */
export async function leaveToReconciliation(
  env: Env,
  paymentId: string,
  transaction: `0x${string}` | null,
  reason: string,
): Promise<void> {
  // The payment lives in its charge's place, which its id names.
  const { db } = placeOfMadeId(placementOf(env), paymentId);
  await db
    .prepare(
      "UPDATE x402_payments SET status = 'unknown', tx_hash = COALESCE(?, tx_hash), error = ?, updated_at = ? WHERE id = ? AND status = 'settling'",
    )
    .bind(transaction, reason.slice(0, 300), nowIso(), paymentId)
    .run();
  await watchSoon(env, paymentId);
}

/** Has the settler's alarm reconcile a payment soon; the minute cron reconciles whatever no alarm watches. */
export async function watchSoon(env: Env, paymentId: string): Promise<void> {
  try {
    await settlerOf(env).watch(paymentId);
  } catch (error) {
    log.warn("x402_watch", { paymentId, error });
  }
}
