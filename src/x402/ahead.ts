import type { Env, X402Settings } from "../config/env";
import { guard } from "../db/statements";
import { notOnBlocklist, screened } from "../kyt/screening";
import type { Place } from "../ledger/place";
import type { Facilitator, FacilitatorVerify } from "./facilitator";
import type { DecodedPayment } from "./payload";
import type { ReceivingRow } from "./receiving";
import { type Reservation, reserveFresh } from "./reserve";
import { type FacilitatedTarget, termsForTarget, type X402TargetRef } from "./target";
import type { Terms } from "./terms";
import { type VerifyResult, verifyOffline } from "./verify";

/** A payment's checks begun before the lookups: its terms, its offline checks, and the chain's check under way. */
export interface Ahead {
  terms: Terms;
  nowSeconds: number;
  offline: VerifyResult;
  /** The facilitator's verification of the payment as sent; null when the offline checks refused it. */
  chain: Promise<FacilitatorVerify> | null;
}

/** Whether our checks recover the signature, or leave it to the facilitator's dry run of the transfer. */
export const signatureCheckOf = (settler: Facilitator) => (settler.checksSignature ? "left_to_chain" : "recover");

/**
 * A merchant's own route (the service as its facilitator) states its terms in the request and its
 * receiving address is already held, so the payment's offline checks need nothing the lookups read:
 * they run first, and the chain's check (one JSON-RPC batch, the longest wait before the
 * reservation) goes out while the lookups read, not after them. Only a payment our checks pass
 * reaches the chain, as before; what the lookups find (a replay, a purchase's earlier attempt, a
 * screened payer) still decides before the chain's answer is used, and an answer not used is dropped.
 */
export async function checkedAhead(
  env: Env,
  x: X402Settings,
  settler: Facilitator,
  ref: X402TargetRef,
  resource: string,
  sent: DecodedPayment | null,
  known: ReceivingRow | null,
): Promise<Ahead | null> {
  if (!sent || !known || ref.kind !== "facilitated") return null;
  const terms = await termsForTarget(env, x, ref, resource, known);
  const nowSeconds = Math.floor(Date.now() / 1000);
  const offline = await verifyOffline(x, terms, sent, nowSeconds, signatureCheckOf(settler));
  if (!offline.isValid) return { terms, nowSeconds, offline, chain: null };
  const chain = settler.verify(sent, terms);
  // Awaited only if the payment goes on; a failure nobody awaits must not surface as unhandled.
  chain.catch(() => undefined);
  return { terms, nowSeconds, offline, chain };
}

/**
 * The common case of a merchant's route, reserved without the lookups' round trip: an authorization
 * our checks and the chain's passed, without a payment identifier, from a payer the built-in list
 * does not name. The reservation's own batch then holds what the lookups would have read (the
 * payer absent from the operators' blocklist, no payment with this authorization: its unique
 * index), so a payment it writes is one the lookups would have let through. Anything else (a
 * refusal, a replay, a race with the same payload, a retry of a failed attempt) answers null and
 * goes the way that reads first, which explains it as before. Only where the blocklist lives with
 * the reservation (control): elsewhere a guard could not read it in the same transaction.
 */
export async function reservedAhead(
  x: X402Settings,
  where: Place,
  target: FacilitatedTarget,
  sent: DecodedPayment,
  ahead: Ahead,
): Promise<Extract<Reservation, { kind: "reserved" }> | null> {
  if (!ahead.chain || !where.isControl || sent.paymentIdentifier !== null) return null;
  const payer = sent.authorization.from;
  if (screened(payer, false).verdict !== "pass") return null;
  const verdict = await ahead.chain;
  if (!verdict.isValid) return null;
  return reserveFresh(x, where, target, ahead.terms, sent, verdict.seenBlock ?? null, [
    guard(...notOnBlocklist(payer)),
  ]);
}
