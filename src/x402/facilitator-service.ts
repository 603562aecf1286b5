import { getAddress, isAddressEqual } from "viem";
import { chargeResource } from "../charges/statements";
import type { Env, X402Settings } from "../config/env";
import { blocklistStatement } from "../kyt/screening";
import { placementOf } from "../ledger/place";
import { IsolateCache } from "../lib/isolate-cache";
import { MAX_AMOUNT_MINOR, USDC_UNITS_PER_CENT } from "../lib/money";
import { merchantNameStatement } from "../merchants/service";
import { type Listing, listingOf, recordListing } from "./discovery";
import { type Facilitator, facilitatorOf } from "./facilitator";
import {
  type Asked,
  askedOf,
  type FacilitatorRequest,
  facilitatorReason,
  type SettleAnswer,
  type VerifyAnswer,
} from "./facilitator-protocol";
import type { X402Outcome } from "./outcome";
import { decodePaymentJson } from "./payload";
import { ensureReceivingAddress, type ReceivingRow, receivingAddressStatement } from "./receiving";
import { payAt, verifiedByBoth } from "./service";
import type { FacilitatedTarget } from "./target";
import { caip2, type Terms, termsForValue } from "./terms";

/*
 * The service as the x402 facilitator of a merchant's own routes. The merchant's middleware asks
 * verify and settle with its key; a payment is taken only to that merchant's own receiving address
 * (one per merchant, derived and held like a charge's), and a settled one is a charge of the
 * merchant, created paid, through the same reservation, settlement and credit as every x402 payment.
 */

/** What a facilitated payment reads of its merchant: its name (for `charge.created`) and its receiving address. */
interface MerchantFacts {
  name: string;
  receiving: ReceivingRow | null;
}

/**
 * A merchant's name never changes, nor its receiving address once derived: each isolate keeps them
 * for merchants that have both, so a paying route's loop reads neither again. Never a merchant
 * without its address (the first `GET /merchant/x402/facilitator` assigns it), never its key (the
 * auth module alone says whether it still works) nor anything of its balance.
 */
const knownFacts = new IsolateCache<string, MerchantFacts>(10_000);

async function factsOf(env: Env, merchantId: string): Promise<MerchantFacts> {
  const known = knownFacts.get(merchantId);
  if (known) return known;
  const control = placementOf(env).control.db;
  const [named, receiving] = await control.batch<Record<string, unknown>>([
    merchantNameStatement(control, merchantId),
    receivingAddressStatement(control, merchantId),
  ]);
  const merchant = named!.results[0] as { name: string } | undefined;
  const facts = { name: merchant?.name ?? "", receiving: (receiving!.results[0] as ReceivingRow | undefined) ?? null };
  if (merchant && facts.receiving?.address) knownFacts.set(merchantId, facts);
  return facts;
}

/** The merchant's x402 `payTo`, assigned on first ask (`GET /merchant/x402/facilitator`). */
export const merchantPayTo = async (env: Env, x: X402Settings, merchantId: string): Promise<`0x${string}`> =>
  getAddress(await ensureReceivingAddress(env, x, { kind: "merchant", id: merchantId, merchantId }));

/** The network as a version names it: the v1 name, or the CAIP-2 id. */
export const networkOf = (x: X402Settings, version: 1 | 2) => (version === 1 ? x.network : caip2(x.chainId));

/**
 * The requirements' own checks, the service's reason when they fail: scheme, network and asset
 * the service settles, and a `payTo` that is this merchant's own address (a merchant without one
 * was never paid to it). The amount is exact in base units, below a cent too.
 */
function refusalOfAsked(x: X402Settings, asked: Asked, receiving: ReceivingRow | null): string | null {
  if (asked.scheme !== "exact") return "unsupported_scheme";
  if (asked.network !== networkOf(x, asked.version)) return "invalid_network";
  if (!isAddressEqual(asked.asset as `0x${string}`, x.asset)) return "invalid_asset";
  if (!receiving?.address || !isAddressEqual(asked.payTo as `0x${string}`, receiving.address as `0x${string}`))
    return "invalid_exact_evm_payload_recipient_mismatch";
  // Any whole number of base units, below a cent too, up to the largest amount a charge takes.
  if (asked.value <= 0n || asked.value > BigInt(MAX_AMOUNT_MINOR) * USDC_UNITS_PER_CENT)
    return "invalid_payment_requirements";
  return null;
}

const targetOf = (merchantId: string, merchantName: string, asked: Asked): FacilitatedTarget => ({
  kind: "facilitated",
  merchantId,
  merchantName,
  value: asked.value,
  description: asked.description,
  resource: asked.resource,
});

const termsOf = (x: X402Settings, asked: Asked, payTo: string): Terms =>
  termsForValue(x, asked.resource ?? "", asked.value, asked.description ?? "", payTo as `0x${string}`);

/** Verifies a payment for the merchant's route as settle would, and changes nothing. */
export async function verifyForMerchant(
  env: Env,
  x: X402Settings,
  merchantId: string,
  request: FacilitatorRequest,
  facilitator?: Facilitator,
): Promise<VerifyAnswer> {
  const asked = askedOf(request);
  const payer = request.paymentPayload.payload.authorization.from;
  const refuse = (reason: string): VerifyAnswer => ({
    isValid: false,
    invalidReason: facilitatorReason(reason, asked.version, "verify"),
    payer,
  });
  const control = placementOf(env).control.db;
  const [{ receiving }, listed] = await Promise.all([
    factsOf(env, merchantId),
    blocklistStatement(control, payer).all(),
  ]);
  const refused = refusalOfAsked(x, asked, receiving);
  if (refused) return refuse(refused);
  const sent = decodePaymentJson(request.paymentPayload);
  if (!sent) return refuse("invalid_payload");
  const terms = termsOf(x, asked, receiving!.address!);
  const settler = facilitator ?? facilitatorOf(env, x);
  const nowSeconds = Math.floor(Date.now() / 1000);
  // The same checks a payment passes before its reservation, so verify answers as settle would.
  const verdict = await verifiedByBoth(x, settler, terms, sent, nowSeconds, listed.results.length > 0);
  if (verdict.isValid) return { isValid: true, payer };
  return refuse("unavailable" in verdict ? "unexpected_verify_error" : verdict.invalidReason);
}

/**
 * Settles a payment for the merchant's route, exactly once per authorization: the reservation
 * takes (network, asset, payer, nonce) before anything is sent, so the same payload asked again,
 * also at once, answers the first one's outcome (waiting for it while it is in flight).
 */
export async function settleForMerchant(
  env: Env,
  x: X402Settings,
  merchantId: string,
  request: FacilitatorRequest,
  facilitator?: Facilitator,
): Promise<SettleAnswer> {
  const asked = askedOf(request);
  const payer = request.paymentPayload.payload.authorization.from;
  const network = networkOf(x, asked.version);
  const fail = (reason: string): SettleAnswer => ({
    success: false,
    errorReason: facilitatorReason(reason, asked.version, "settle"),
    transaction: "",
    network,
    payer,
  });
  const { name, receiving } = await factsOf(env, merchantId);
  const refused = refusalOfAsked(x, asked, receiving);
  if (refused) return fail(refused);
  const sent = decodePaymentJson(request.paymentPayload);
  if (!sent) return fail("invalid_payload");
  const where = await placementOf(env).ofMerchant(merchantId);
  const target = targetOf(merchantId, name, asked);
  const paid = await payAt(env, x, where, target, asked.resource ?? "", sent, facilitator, receiving);
  const outcome = await settledOrFinal(env, x, paid);
  switch (outcome.kind) {
    case "settled": {
      const listing = listingOf(request, asked);
      if (listing) await listPaid(env, merchantId, outcome.paymentId, asked, listing);
      return { success: true, transaction: outcome.transaction, network, payer };
    }
    case "pending":
      // The money may have moved: never a plain failure. Version 2 has the code for it; version 1 has none.
      return {
        success: false,
        errorReason: asked.version === 2 ? "settlement_pending" : "unexpected_settle_error",
        transaction: outcome.transaction ?? "",
        network,
        payer,
      };
    case "failed":
      return fail(outcome.reason);
  }
}

/**
 * Lists a paid route under the resource its charge was made for, at the payment's time: a replay
 * naming another URL (the v2 resource is not signed) lists nothing new. Read only for a route that
 * declared discovery metadata.
 */
async function listPaid(env: Env, merchantId: string, paymentId: string, asked: Asked, listing: Listing) {
  const at = placementOf(env).ofId(paymentId)!;
  const paid = await at.db
    .prepare("SELECT updated_at AS paidAt, charge_id AS chargeId FROM x402_payments WHERE id = ?")
    .bind(paymentId)
    .first<{ paidAt: string; chargeId: string }>();
  if (!paid || (await chargeResource(at.db, paid.chargeId)) !== asked.resource) return;
  await recordListing(env, merchantId, listing, paid.paidAt);
}

type Final =
  | { kind: "settled"; transaction: string; paymentId: string }
  | { kind: "pending"; transaction: string | null }
  | { kind: "failed"; reason: string };

/** How long a request waits for the same authorization's settlement that another request has in flight. */
const WAIT_STEP_MS = 150;

/**
 * The outcome as the answer states it. A payment in flight (`settling`: another request with the
 * same authorization holds the reservation) is waited for, up to the settlement's own deadline, so
 * that concurrent requests answer the same transaction; one left to reconciliation answers pending.
 */
async function settledOrFinal(env: Env, x: X402Settings, outcome: X402Outcome): Promise<Final> {
  switch (outcome.kind) {
    case "settled":
      // Already read (or just written) by this request: nothing more to wait for.
      return { kind: "settled", transaction: outcome.transaction, paymentId: outcome.settlementId };
    case "pending":
      return finalOf(env, x, outcome.settlementId);
    case "invalid":
    case "settle_failed":
      return { kind: "failed", reason: outcome.reason };
    case "unavailable":
      return { kind: "failed", reason: "unexpected_settle_error" };
    default:
      // A facilitated payment makes its own charge: nothing else pays it, and it always exists.
      return { kind: "failed", reason: "invalid_transaction_state" };
  }
}

async function finalOf(env: Env, x: X402Settings, paymentId: string): Promise<Final> {
  const at = placementOf(env).ofId(paymentId)!;
  const deadline = Date.now() + x.facilitatorTimeoutMs + 5_000;
  for (;;) {
    const row = await at.db
      .prepare("SELECT status, tx_hash AS txHash, error FROM x402_payments WHERE id = ?")
      .bind(paymentId)
      .first<{ status: string; txHash: string | null; error: string | null }>();
    if (row?.status === "settled") return { kind: "settled", transaction: row.txHash ?? "", paymentId };
    if (row?.status === "failed") return { kind: "failed", reason: row.error ?? "unexpected_settle_error" };
    if (row?.status !== "settling" || Date.now() > deadline)
      return { kind: "pending", transaction: row?.txHash ?? null };
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
  }
}
