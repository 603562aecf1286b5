import type { ChargeRow } from "../charges/service";
import type { Env, X402Settings } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { centsToUsdcUnits } from "../lib/money";
import { ensureReceivingAddress, type ReceivingOwner, type ReceivingRow } from "./receiving";
import { type Terms, termsForValue } from "./terms";

/**
 * What is being paid: a stored charge, a charge born from a checkout link with this payment, or one
 * born from a payment to a merchant's own x402 route, settled with the service as its facilitator
 * (`facilitated`: the route's requirements name the price, in token base units, and the resource).
 */
export type X402Target =
  | { kind: "charge"; charge: ChargeRow }
  | {
      kind: "checkout";
      link: { id: string; merchantId: string; amountMinor: number; description: string; externalId: string | null };
      merchantName: string;
    }
  | FacilitatedTarget;

export interface FacilitatedTarget {
  kind: "facilitated";
  merchantId: string;
  merchantName: string;
  /** Token base units the route asks. */
  value: bigint;
  description: string | null;
  /** The paid URL; null when a version 2 payload names none. */
  resource: string | null;
}

/** A target as a request names it: a stored charge by id is read with the payment's own lookups, in one round trip. */
export type X402TargetRef = X402Target | { kind: "charge_id"; chargeId: string };

/** Token base units a target asks. */
const targetValue = (t: X402Target): bigint =>
  t.kind === "facilitated"
    ? t.value
    : // A stored charge asks its exact amount: its cents are rounded down when it is below or between cents.
      t.kind === "charge"
      ? BigInt(t.charge.amountBaseUnits)
      : centsToUsdcUnits(t.link.amountMinor);
const targetDescription = (t: X402Target) =>
  t.kind === "charge"
    ? (t.charge.description ?? `Charge ${t.charge.id}`)
    : t.kind === "checkout"
      ? t.link.description
      : (t.description ?? "");

/** Whose receiving address an authorization for this target pays: the charge's own, the link's, or the merchant's. */
const ownerOf = (t: X402Target): ReceivingOwner =>
  t.kind === "charge"
    ? { kind: "charge", id: t.charge.id, merchantId: t.charge.merchantId }
    : t.kind === "checkout"
      ? { kind: "checkout_link", id: t.link.id, merchantId: t.link.merchantId }
      : { kind: "merchant", id: t.merchantId, merchantId: t.merchantId };

/** The id a target's receiving address and place go by: the charge's, the checkout link's, or the merchant's. */
export const ownerIdOf = (ref: X402TargetRef): string =>
  ref.kind === "charge_id"
    ? ref.chargeId
    : ref.kind === "charge"
      ? ref.charge.id
      : ref.kind === "checkout"
        ? ref.link.id
        : ref.merchantId;

/**
 * Where an x402 payment of this target lives, with the charge it pays: a stored charge's own place
 * (its id carries it), and for a checkout link the link's, where the charge it makes is born. Its
 * reservation, claim, credit and status all live there; the receiving address and the blocklist
 * stay in control. Null for an id naming a shard this deployment does not run: it names no charge.
 */
export const placeOfTarget = async (env: Env, ref: X402TargetRef): Promise<Place | null> =>
  // A merchant's id names no shard: its home is the directory's to say.
  ref.kind === "facilitated" ? placementOf(env).ofMerchant(ref.merchantId) : placementOf(env).ofId(ownerIdOf(ref));

/** The terms of a target: its amount, to its own receiving address (assigned on first use). */
export async function termsForTarget(
  env: Env,
  x: X402Settings,
  target: X402Target,
  resource: string,
  known?: ReceivingRow | null,
): Promise<Terms> {
  const payTo = await ensureReceivingAddress(env, x, ownerOf(target), known);
  return termsForValue(x, resource, targetValue(target), targetDescription(target), payTo);
}
