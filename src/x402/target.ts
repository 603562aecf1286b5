import type { ChargeRow } from "../charges/service";
import type { Env, X402Settings } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { ensureReceivingAddress, type ReceivingOwner, type ReceivingRow } from "./receiving";
import { type Terms, termsFor } from "./terms";

/** What is being paid: a stored charge, or a charge born from a checkout link with this payment. */
export type X402Target =
  | { kind: "charge"; charge: ChargeRow }
  | {
      kind: "checkout";
      link: { id: string; merchantId: string; amountMinor: number; description: string; externalId: string | null };
      merchantName: string;
    };

/** A target as a request names it: a stored charge by id is read with the payment's own lookups, in one round trip. */
export type X402TargetRef = X402Target | { kind: "charge_id"; chargeId: string };

const targetAmount = (t: X402Target) => (t.kind === "charge" ? t.charge.amountMinor : t.link.amountMinor);
const targetDescription = (t: X402Target) =>
  t.kind === "charge" ? (t.charge.description ?? `Charge ${t.charge.id}`) : t.link.description;

/** Whose receiving address an authorization for this target pays: the charge's own, or the link's. */
const ownerOf = (t: X402Target): ReceivingOwner =>
  t.kind === "charge"
    ? { kind: "charge", id: t.charge.id, merchantId: t.charge.merchantId }
    : { kind: "checkout_link", id: t.link.id, merchantId: t.link.merchantId };

/** The id a target's receiving address and place go by: the charge's, or the checkout link's. */
export const ownerIdOf = (ref: X402TargetRef): string =>
  ref.kind === "charge_id" ? ref.chargeId : ref.kind === "charge" ? ref.charge.id : ref.link.id;

/**
 * Where an x402 payment of this target lives, with the charge it pays: a stored charge's own place
 * (its id carries it), and for a checkout link the link's, where the charge it makes is born. Its
 * reservation, claim, credit and status all live there; the receiving address and the blocklist
 * stay in control. Null for an id naming a shard this deployment does not run: it names no charge.
 */
export const placeOfTarget = (env: Env, ref: X402TargetRef): Place | null => placementOf(env).ofId(ownerIdOf(ref));

/** The terms of a target: its amount, to its own receiving address (assigned on first use). */
export async function termsForTarget(
  env: Env,
  x: X402Settings,
  target: X402Target,
  resource: string,
  known?: ReceivingRow | null,
): Promise<Terms> {
  const payTo = await ensureReceivingAddress(env, x, ownerOf(target), known);
  return termsFor(x, resource, targetAmount(target), targetDescription(target), payTo);
}
