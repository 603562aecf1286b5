import { authorizationUsed, movedBy, type Receipt, receiptNow, rpcBatch } from "../chain/client";
import { authorizationFate } from "../chain/logs";
import { getCharge } from "../charges/service";
import { chargeStatus } from "../charges/statements";
import type { Env, X402Settings } from "../config/env";
import { settingsOf } from "../config/env";
import { placeOfMadeId } from "../ledger/made-places";
import { placementOf } from "../ledger/place";
import { log } from "../lib/log";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";
import { credit, release, reopenReleased } from "./settlement";
import { gasAccountOf } from "./transfer";
import { CLOCK_SKEW_SECONDS } from "./verify";

/**
 * A payment still `settling` this long after its last update lost its worker (a crash mid-settlement);
 * one whose authorization is still unused this long after, with no transaction known, was never sent.
 */
const STALE_SETTLING_MS = 5 * 60_000;

export interface OpenPayment {
  id: string;
  /** The chain and token the authorization was signed for (lower case). */
  network: string;
  asset: string;
  chargeId: string;
  payer: `0x${string}`;
  nonce: `0x${string}`;
  value: string;
  validBefore: number;
  txHash: `0x${string}` | null;
  /** The receiving address the authorization pays; null on rows from before those: the settlement address. */
  payTo: `0x${string}` | null;
  /** When its status last changed (ISO 8601). */
  updatedAt: string;
  /** The head at which the chain showed its authorization unused (null on rows from before it was recorded). */
  seenBlock: number | null;
}

export type Reconciliation = "credited" | "failed" | "waiting";

/** The columns of an x402 payment that reconciliation reads, as an OpenPayment. */
export const OPEN_PAYMENT_SELECT =
  "SELECT id, network, asset, charge_id AS chargeId, payer, nonce, value, valid_before AS validBefore, tx_hash AS txHash, pay_to AS payTo, updated_at AS updatedAt, seen_block AS seenBlock FROM x402_payments";

/**
 * Settles the fate of a payment whose outcome was lost or reported failed, from the chain alone:
 * if the token marks the authorization used and the transaction that used it moved the agreed
 * value from the payer to our address, the charge is credited with that transaction (once: the
 * credit batch requires the payment to be still open); if it is unused and expired, nothing can
 * ever move and the claim is released. The transaction the payment names is only a hint: someone
 * else may have submitted the authorization first (the funds still go to the signed `to`), and
 * then ours reverted; the token's AuthorizationUsed log names the one that used it.
 */
export async function reconcilePayment(
  env: Env,
  x: X402Settings,
  p: OpenPayment,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<Reconciliation> {
  // Asked on another token (X402_ASSET changed since), an authorization looks unused and would be
  // released though it paid on its own: that is for an operator, never decided here.
  if (p.asset.toLowerCase() !== x.asset.toLowerCase() || p.network !== x.network) {
    log.error("x402_reconcile_asset_changed", { paymentId: p.id, asset: p.asset, configured: x.asset });
    return "waiting";
  }
  if (!(await authorizationUsed(x, p.payer, p.nonce))) {
    // Our clock may run ahead of the chain's: a transaction still waiting could land in a block
    // stamped before validBefore, so expiry waits out the skew the checks tolerate.
    if (p.validBefore + CLOCK_SKEW_SECONDS <= nowSeconds) {
      await release(env, p.id, p.chargeId, "authorization_expired_unused", nowIso());
      return "failed";
    }
    if (await neverSent(x, p, nowSeconds)) {
      // Released, it is watched until it expires like any released payment: if it is used after all,
      // its charge is credited with it while still open, or it is marked for an operator.
      await release(env, p.id, p.chargeId, "settlement_not_sent", nowIso());
      return "failed";
    }
    return "waiting";
  }
  let receipt = p.txHash ? await receiptNow(x, p.txHash) : null;
  if (!receipt || !paysUs(x, p, receipt)) {
    // A refused search throws (and is logged by the chain client): the payment waits for the next run.
    const fate = await authorizationFate(x, p.payer, p.nonce, p.seenBlock);
    if (fate.kind === "canceled") {
      await release(env, p.id, p.chargeId, "authorization_canceled", nowIso());
      return "failed";
    }
    if (fate.kind === "unseen") return "waiting";
    if (fate.transaction !== receipt?.transactionHash) receipt = await receiptNow(x, fate.transaction);
    if (!receipt) return "waiting";
  }
  if (!paysUs(x, p, receipt)) {
    // The transaction that used it moved nothing to us (another recipient's authorization cannot
    // share this nonce, so this is a token that behaves otherwise): nothing was received.
    await release(env, p.id, p.chargeId, "authorization_used_without_transfer", nowIso());
    return "failed";
  }
  const charge = await getCharge(placeOfMadeId(placementOf(env), p.chargeId).db, p.chargeId);
  if (!charge) return "waiting";
  await credit(env, x, charge, p.id, p.payer.toLowerCase(), receipt.transactionHash);
  return "credited";
}

/**
 * Was this payment, whose authorization the chain says is unused, never sent (the Worker died
 * between the reservation and the broadcast, or a batch waiting in its lane was lost)? Only the
 * built-in facilitator's sends are known here: no transaction recorded, its last update long past,
 * and none of the gas keys has a transaction waiting in the node's mempool that could still be it.
 * A remote facilitator's may be in flight anywhere, so those wait for expiry.
 */
async function neverSent(x: X402Settings, p: OpenPayment, nowSeconds: number): Promise<boolean> {
  if (p.txHash || x.facilitatorUrl || x.facilitatorPrivateKeys.length === 0) return false;
  if (Date.parse(p.updatedAt) > nowSeconds * 1000 - STALE_SETTLING_MS) return false;
  const counts = await rpcBatch(
    x,
    x.facilitatorPrivateKeys.flatMap((key) => {
      const address = gasAccountOf(key).address;
      return ["latest", "pending"].map((block) => ({ method: "eth_getTransactionCount", params: [address, block] }));
    }),
  );
  if (counts.some((c) => typeof c.result !== "string")) return false;
  for (let i = 0; i < counts.length; i += 2)
    if (BigInt(counts[i + 1]!.result as string) > BigInt(counts[i]!.result as string)) return false;
  return true;
}

/** Did this transaction move the payment's value from its payer to the address it pays? */
const paysUs = (x: X402Settings, p: OpenPayment, receipt: Receipt) =>
  movedBy(x, receipt, { from: p.payer, to: p.payTo ?? x.payTo, value: BigInt(p.value) });

/** Marks a released payment whose later use this watch has already dealt with, so it is not read again. */
const LATE_USE = "used_after_release";
/** Releases the chain decided for good (reconcilePayment's verdicts): nothing is left to watch. */
const FINAL_VERDICTS = [
  LATE_USE,
  "authorization_expired_unused",
  "authorization_canceled",
  "authorization_used_without_transfer",
];

/**
 * A payment released after a failed settlement leaves an authorization that anyone holding it (the
 * payer, or anyone who read a reverted transaction's calldata) can still submit until validBefore,
 * and the token then pays the charge's receiving address all the same. So released payments are
 * watched while they can still be used. One that was used is taken back for its charge when the
 * charge is still open (pending, unclaimed): it is reopened as `unknown` with the claim, and
 * reconciliation credits its transaction as any other. While another payment holds the charge it
 * waits for the next run. If the charge was paid meanwhile by another payment, the money is the
 * payer's and sits on the receiving address (the sweep moves only what was credited): it is logged
 * as an error for an operator and marked, never credited.
 */
export async function watchReleasedPayments(env: Env, x: X402Settings, nowSeconds: number): Promise<number> {
  let reopened = 0;
  // A payment lives in its charge's place: each place's released payments are watched in turn.
  for (const { db } of placementOf(env).each()) reopened += await watchReleasedIn(env, db, x, nowSeconds);
  return reopened;
}

async function watchReleasedIn(env: Env, db: D1Database, x: X402Settings, nowSeconds: number): Promise<number> {
  const released = await db
    .prepare(
      `SELECT id, charge_id AS chargeId, payer, nonce, network, asset, seen_block AS seenBlock FROM x402_payments
     WHERE status = 'failed' AND valid_before + ? > ? AND COALESCE(error, '') NOT IN (${FINAL_VERDICTS.map(() => "?").join(", ")})
     ORDER BY updated_at LIMIT 50`,
    )
    .bind(CLOCK_SKEW_SECONDS, nowSeconds, ...FINAL_VERDICTS)
    .all<{
      id: string;
      chargeId: string;
      payer: `0x${string}`;
      nonce: `0x${string}`;
      network: string;
      asset: string;
      seenBlock: number | null;
    }>();
  let reopened = 0;
  const checked: string[] = [];
  for (const p of released.results) {
    // The rest keep their place at the front (least recently checked) for the next run.
    if (!roomFor(RELEASED_COST, "x402_watch_released")) break;
    checked.push(p.id);
    if (p.asset.toLowerCase() !== x.asset.toLowerCase() || p.network !== x.network) continue;
    if (!(await authorizationUsed(x, p.payer, p.nonce))) continue;
    if (await reopenReleased(env, p.id, p.chargeId)) {
      reopened++;
      continue;
    }
    // Held by another payment still being settled: that one may yet fail (this authorization took the
    // payer's funds, say) and leave the charge open for this one, so it is looked at again next run.
    if ((await chargeStatus(db, p.chargeId)) === "pending") continue;
    const fate = await authorizationFate(x, p.payer, p.nonce, p.seenBlock);
    if (fate.kind !== "canceled")
      log.error("x402_used_after_release", {
        paymentId: p.id,
        chargeId: p.chargeId,
        transaction: fate.kind === "used" ? fate.transaction : null,
      });
    // Recorded with the transaction that moved the payer's money, for the operator who returns it.
    await db
      .prepare(
        "UPDATE x402_payments SET error = ?, tx_hash = COALESCE(?, tx_hash), updated_at = ? WHERE id = ? AND status = 'failed'",
      )
      .bind(LATE_USE, fate.kind === "used" ? fate.transaction : null, nowIso(), p.id)
      .run();
  }
  // Least recently checked first: released payments that stay unused must not keep later ones from being read.
  if (checked.length > 0)
    await db
      .prepare(
        `UPDATE x402_payments SET updated_at = ? WHERE status = 'failed' AND id IN (${checked.map(() => "?").join(", ")})`,
      )
      .bind(nowIso(), ...checked)
      .run();
  return reopened;
}

/**
 * One released payment's worst case: D1 its reopening read and batch (2), its charge's status (1)
 * and its mark (1); subrequests the authorization's state (1), the reopening's commit (1) and its
 * fate (2).
 */
const RELEASED_COST = { d1Queries: 4, subrequests: 4 } as const;
/**
 * One open payment's worst case: D1 its charge (1) and its credit's or release's reads and batch (4);
 * subrequests the authorization's state (1), the mempool batch (1), two receipts (2), its fate (2)
 * and the ledger's commit (1).
 */
const RECONCILE_COST = { d1Queries: 5, subrequests: 7 } as const;

/** The cron's sweep over payments whose outcome is unknown or whose worker vanished. */
export async function reconcileOpenPayments(env: Env, now = Date.now()): Promise<Record<Reconciliation, number>> {
  const x = settingsOf(env).x402;
  const counts: Record<Reconciliation, number> = { credited: 0, failed: 0, waiting: 0 };
  if (!x) return counts;
  try {
    // First, so a released payment used on chain is reconciled in this same run.
    await watchReleasedPayments(env, x, Math.floor(now / 1000));
  } catch (error) {
    log.warn("x402_watch_released", { error });
  }
  // Every place's open payments (each payment lives in its charge's place), at most 50 of each.
  const open = (
    await Promise.all(
      placementOf(env)
        .each()
        .map(({ db }) =>
          db
            .prepare(
              `${OPEN_PAYMENT_SELECT}
     WHERE status = 'unknown' OR (status = 'settling' AND updated_at <= ?) ORDER BY updated_at LIMIT 50`,
            )
            .bind(nowIso(now - STALE_SETTLING_MS))
            .all<OpenPayment>(),
        ),
    )
  ).flatMap((r) => r.results);
  for (const [i, payment] of open.entries()) {
    // Unknown payments untouched keep their place (oldest updated_at first) for the next run.
    if (!roomFor(RECONCILE_COST, "x402_reconcile", { left: open.length - i })) break;
    try {
      counts[await reconcilePayment(env, x, payment)]++;
    } catch (error) {
      counts.waiting++;
      log.warn("x402_reconcile", { paymentId: payment.id, error });
    }
  }
  return counts;
}
