import { authorizationUsed } from "../chain/client";
import { chargeView } from "../charges/service";
import type { Env, X402Settings } from "../config/env";
import { settingsOf } from "../config/env";
import type { Place } from "../ledger/place";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { type Ahead, checkedAhead, reservedAhead, signatureCheckOf } from "./ahead";
import {
  outcomeOfEarlier,
  type PaymentRow,
  paymentStatement,
  replayOf,
  sameTarget,
  storedPayment,
} from "./earlier-payments";
import { type Facilitator, type FacilitatorVerify, facilitatorOf } from "./facilitator";
import { type LookedUp, lookUp } from "./lookup";
import type { X402Outcome } from "./outcome";
import { type DecodedPayment, decodePaymentHeader } from "./payload";
import type { ReceivingRow } from "./receiving";
import { leaveToReconciliation, watchSoon } from "./reconcile-later";
import { type Reservation, reserve } from "./reserve";
import { credit, release, reopenReleased } from "./settlement";
import { placeOfTarget, termsForTarget, type X402Target, type X402TargetRef } from "./target";
import type { Terms } from "./terms";
import { type VerifyResult, verifyOffline, verifyPayment } from "./verify";

/**
 * Pays a charge or a checkout link with an x402 payment header, exactly once:
 *   1. decode and verify (terms, window, signature, KYT; then the facilitator's part: nonce and
 *      balance on chain, and for ours the transfer's own dry run);
 *   2. reserve (network, asset, payer, nonce) and claim the charge in one batch,
 *      before the facilitator is called: a racing payment finds the claim, a
 *      replayed authorization finds the reservation;
 *   3. settle; credit the merchant in one ledger batch guarded by the claim.
 * An unknown settlement outcome keeps the claim and is reconciled later. A payment carrying a v2
 * payment identifier this payer already paid with (a retry of the same purchase, with a new
 * authorization) gets that payment's outcome once its signature proves the payer: nothing more is
 * settled or charged.
 */
export async function payWithX402(
  env: Env,
  ref: X402TargetRef,
  resource: string,
  header: string,
  facilitator?: Facilitator,
): Promise<X402Outcome> {
  const x = settingsOf(env).x402;
  if (!x) throw new Error("x402 is not configured");
  // An id naming a shard this deployment does not run names no charge.
  const where = await placeOfTarget(env, ref);
  if (!where) return { kind: "charge_not_found" };
  return payAt(env, x, where, ref, resource, decodePaymentHeader(header), facilitator);
}

/** `payWithX402` for a payment already decoded, whose target lives at `where`. */
export async function payAt(
  env: Env,
  x: X402Settings,
  where: Place,
  ref: X402TargetRef,
  resource: string,
  sent: DecodedPayment | null,
  facilitator?: Facilitator,
  /** The target's receiving address, when the caller already read it: it is not read again. */
  knownReceiving: ReceivingRow | null = null,
): Promise<X402Outcome> {
  const settler = facilitator ?? facilitatorOf(env, x);
  const ahead = await checkedAhead(env, x, settler, ref, resource, sent, knownReceiving);
  if (ahead && sent && ref.kind === "facilitated") {
    const reserved = await reservedAhead(x, where, ref, sent, ahead);
    if (reserved)
      return settleReserved(env, x, settler, ahead.terms, sent, reserved, sent.authorization.from.toLowerCase());
  }
  const found = await lookUp(env, x, where, ref, sent, knownReceiving);
  const { target, receiving } = found;
  if (!target) return { kind: "charge_not_found" };
  if (target.kind === "charge" && closedToOthers(target.charge)) return { kind: "not_payable" };
  const terms = ahead?.terms ?? (await termsForTarget(env, x, target, resource, receiving));
  if (!sent) return { kind: "invalid", reason: "invalid_payload", terms };
  const payer = sent.authorization.from.toLowerCase();

  if (found.earlier && found.earlier.status !== "failed") {
    if (!replayOf(found.earlier, target, terms, sent))
      return { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used", terms };
    return outcomeOfEarlier(found.earlier, payer);
  }
  const nowSeconds = ahead?.nowSeconds ?? Math.floor(Date.now() / 1000);
  const chosen = await paymentToSettle(x, target, terms, sent, found, payer, nowSeconds);
  if ("outcome" in chosen) return chosen.outcome;

  if (target.kind === "charge" && target.charge.status === "paid") {
    // Paid by something else: no new payment is taken; the charge answers with itself.
    return { kind: "already_paid", charge: chargeView(target.charge) };
  }
  const verified = await verifyBeforeReserving(
    env,
    x,
    settler,
    terms,
    sent,
    chosen,
    found.onBlocklist,
    payer,
    nowSeconds,
    ahead,
  );
  if ("kind" in verified) return (await usedMeanwhile(where, x, sent, target, terms, payer, verified)) ?? verified;

  const reserved = await reserve(x, where, target, terms, chosen.payment, chosen.earlier, verified.seenBlock);
  if (reserved.kind !== "reserved")
    return reserved.kind === "outcome" ? reserved.outcome : { kind: "invalid", reason: reserved.reason, terms };
  return settleReserved(env, x, settler, terms, chosen.payment, reserved, payer);
}

/**
 * A pending charge a merchant's facilitated settlement made is paid by that payment only, which
 * never comes this way (it settles through the facilitator's own target): after that settlement
 * failed, nobody else may pay it.
 */
export const closedToOthers = (charge: { status: string; facilitated: number }) =>
  charge.status === "pending" && charge.facilitated === 1;

/**
 * What the chain answers an authorization another request has used since this one looked: its
 * nonce used, or the transfer's dry run refused (`simulation_failed: <the node's message>`).
 */
const usedOnChain = (reason: string) =>
  reason === "invalid_exact_evm_nonce_already_used" ||
  reason.startsWith("simulation_failed") ||
  reason === "invalid_exact_evm_transaction_simulation_failed";

/**
 * The outcome of the request that used this authorization while this one was being checked. The
 * earlier payment was looked for before the checks; a request with the same authorization that
 * reserved and settled in between makes the chain refuse this one, which must then answer that
 * request's outcome (the same transaction) rather than a refusal of a payment that was made.
 */
async function usedMeanwhile(
  where: Place,
  x: X402Settings,
  sent: DecodedPayment,
  target: X402Target,
  terms: Terms,
  payer: string,
  verdict: X402Outcome,
): Promise<X402Outcome | null> {
  if (verdict.kind !== "invalid" || !usedOnChain(verdict.reason)) return null;
  const earlier = await paymentStatement(where.db, x, sent).first<PaymentRow>();
  if (!earlier || earlier.status === "failed") return null;
  if (!replayOf(earlier, target, terms, sent))
    return { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used", terms };
  return outcomeOfEarlier(earlier, payer);
}

/** The payment a request goes on with, and what it stands for. */
interface Chosen {
  payment: DecodedPayment;
  /** The failed attempt the reservation takes up again, if any. */
  earlier: PaymentRow | null;
  /** A released attempt of this purchase whose stored authorization is settled instead of the one sent. */
  retryOfReleased: PaymentRow | null;
  /** The offline checks of the payment as sent, when it carries a payment identifier. */
  proof: VerifyResult | undefined;
}

/**
 * The payment to settle: the one sent, or (for a retry of a purchase whose earlier attempt failed)
 * that attempt's stored authorization; or the outcome the purchase already has.
 */
async function paymentToSettle(
  x: X402Settings,
  target: X402Target,
  terms: Terms,
  sent: DecodedPayment,
  found: LookedUp,
  payer: string,
  nowSeconds: number,
): Promise<Chosen | { outcome: X402Outcome }> {
  const { identified, earlier } = found;
  // Only the payer's own signature may learn (and reuse) what its identifier paid: without it the
  // payment goes on as any other, so the answer tells nothing of whether the identifier was used. The
  // signature is checked whenever an identifier is sent, used or not, so neither does the time taken.
  const proof = sent.paymentIdentifier !== null ? await verifyOffline(x, terms, sent, nowSeconds) : undefined;
  const asSent: Chosen = { payment: sent, earlier, retryOfReleased: null, proof };
  if (!identified || identified.id === earlier?.id || !proof?.isValid) return asSent;
  // One identifier is one purchase: the same id for something else is refused, never answered with another's outcome.
  if (!sameTarget(identified, target, terms)) return { outcome: { kind: "invalid", reason: "invalid_payload", terms } };
  if (identified.status !== "failed") return { outcome: outcomeOfEarlier(identified, payer) };
  // The purchase's earlier attempt failed, but its authorization can still be used by whoever holds
  // it: that one is settled again instead of this new one, so one purchase never has two live
  // authorizations that could both pay.
  const stored = storedPayment(x, identified, terms, nowSeconds);
  if (!stored) return asSent;
  return {
    payment: { ...stored, paymentIdentifier: sent.paymentIdentifier },
    earlier: identified,
    retryOfReleased: identified,
    proof,
  };
}

/**
 * Our checks of a payment (terms, window, signature, KYT), then the facilitator's (nonce and balance
 * on chain, and for ours the transfer's dry run): the one pipeline of every x402 verification, a
 * payment's before its reservation and a facilitated route's `verify`. `proof` is an offline check
 * of this very payment already made; a facilitator whose verification runs the transfer proves the
 * signature there, so it is not recovered twice.
 */
export async function verifiedByBoth(
  x: X402Settings,
  settler: Facilitator,
  terms: Terms,
  payment: DecodedPayment,
  nowSeconds: number,
  onBlocklist: boolean,
  proof?: VerifyResult,
  /** The facilitator's verification of this very payment to these terms, already under way. */
  chain?: Promise<FacilitatorVerify> | null,
): Promise<FacilitatorVerify> {
  const verdict = await verifyPayment(x, terms, payment, nowSeconds, onBlocklist, proof, signatureCheckOf(settler));
  if (!verdict.isValid) return { isValid: false, invalidReason: verdict.invalidReason };
  return chain ?? settler.verify(payment, terms);
}

/**
 * Both checks before anything is reserved: the outcome that refuses the payment, or the head at
 * which the chain showed its authorization unused when it may go on.
 */
async function verifyBeforeReserving(
  env: Env,
  x: X402Settings,
  settler: Facilitator,
  terms: Terms,
  sent: DecodedPayment,
  { payment, proof, retryOfReleased }: Chosen,
  onBlocklist: boolean,
  payer: string,
  nowSeconds: number,
  ahead: Ahead | null,
): Promise<X402Outcome | { seenBlock: number | null }> {
  // The checks above already ran on the payment as sent; a stored one standing in for it is checked afresh.
  const asSent = payment === sent;
  const verdict = await verifiedByBoth(
    x,
    settler,
    terms,
    payment,
    nowSeconds,
    onBlocklist,
    asSent ? (proof ?? ahead?.offline) : undefined,
    asSent ? ahead?.chain : null,
  );
  if (verdict.isValid) return { seenBlock: verdict.seenBlock ?? null };
  if ("unavailable" in verdict) return { kind: "unavailable", error: verdict.unavailable, reason: verdict.reason };
  // The released authorization this retry stands for was used on chain since (someone submitted it):
  // the purchase may be paid, so it is taken back for its charge and left to the chain, not refused.
  // (Our own checks never answer a used nonce: only the chain does.)
  if (retryOfReleased && verdict.invalidReason === "invalid_exact_evm_nonce_already_used") {
    if (await reopenReleased(env, retryOfReleased.id, retryOfReleased.chargeId)) {
      await watchSoon(env, retryOfReleased.id);
      return outcomeOfEarlier({ ...retryOfReleased, status: "unknown" }, payer);
    }
  }
  return { kind: "invalid", reason: verdict.invalidReason, terms };
}

/** Settles a reserved payment and credits it; an outcome only the chain can tell is left to reconciliation. */
async function settleReserved(
  env: Env,
  x: X402Settings,
  settler: Facilitator,
  terms: Terms,
  payment: DecodedPayment,
  { paymentId, charge }: Extract<Reservation, { kind: "reserved" }>,
  payer: string,
): Promise<X402Outcome> {
  const settled = await settler.settle(payment, terms);
  const pending = (transaction: `0x${string}` | null, reason: string): Promise<X402Outcome> =>
    leaveToReconciliation(env, paymentId, transaction, reason).then(() => ({
      kind: "pending",
      settlementId: paymentId,
      chargeId: charge.id,
      transaction,
      payer,
    }));
  if (settled.kind === "settled") {
    try {
      await credit(env, x, charge, paymentId, payer, settled.transaction);
    } catch (error) {
      // The money moved: the payer must not be told otherwise, and reconciliation credits it from the chain.
      log.error("x402_credit", { paymentId, error });
      return pending(settled.transaction, "credit_failed");
    }
    return { kind: "settled", settlementId: paymentId, chargeId: charge.id, transaction: settled.transaction, payer };
  }
  if (settled.kind === "failed") {
    // A settlement reported failed can still have paid: someone else may have submitted the
    // authorization first (the funds still go to the signed `to`), or a facilitator may have
    // broadcast before failing. Only an authorization the chain says is unused is released.
    const used = await authorizationUsed(x, payer, payment.authorization.nonce).catch(() => null);
    if (used === false) {
      await release(env, paymentId, charge.id, settled.reason, nowIso());
      return { kind: "settle_failed", reason: settled.reason, terms, payer };
    }
    return pending(null, `${settled.reason}; ${used ? "authorization used on chain" : "chain unreadable"}`);
  }
  return pending(settled.transaction, settled.reason);
}
