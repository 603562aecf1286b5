import type { X402Settings } from "../src/config/env";
import type { PayableTerms } from "../src/x402/outbound/choice";
import type { AcceptsEntry, PaymentRequired } from "../src/x402/outbound/request";
import { signOutbound } from "../src/x402/outbound/sign";
import { type DecodedPayment, decodePaymentHeader } from "../src/x402/payload";
import { caip2 } from "../src/x402/terms";

/**
 * The signature an outbound x402 authorization costs (POST /agent/x402/payments), for the floor
 * "signature + DO RPC + payment-sized batch" and the step of the same name: the service's own
 * `signOutbound` (an EIP-712 `TransferWithAuthorization` typed-data signature by the settlement key,
 * and the header that carries it) on terms already chosen. The entry's choice, the policy and the
 * wallet's turn are the service's work beyond its floor, so none of them is here.
 */

/** Who the floor's authorizations pay: never sent anywhere, so any address but zero does. */
export const BENCH_OUTBOUND_PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
/** $0.001, the amount the bench's outbound row authorizes each time. */
export const BENCH_OUTBOUND_BASE_UNITS = 1000n;
const RESOURCE = "https://bench.example/report";
/** As the row's terms say (scripts/bench/outbound.mjs): the longest the service signs, so none expires during a run. */
const MAX_TIMEOUT_SECONDS = 3600;

/** A version 2 402 for the service's own chain and token, and the terms the service would choose from it. */
function chosen(x: X402Settings): { paymentRequired: PaymentRequired; entry: AcceptsEntry; terms: PayableTerms } {
  const entry: AcceptsEntry = {
    scheme: "exact",
    network: caip2(x.chainId),
    amount: BENCH_OUTBOUND_BASE_UNITS.toString(),
    asset: x.asset,
    payTo: BENCH_OUTBOUND_PAY_TO,
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra: { name: x.assetName, version: x.assetVersion },
  };
  const terms: PayableTerms = {
    version: 2,
    scheme: "exact",
    network: entry.network,
    asset: x.asset,
    payTo: BENCH_OUTBOUND_PAY_TO,
    value: BENCH_OUTBOUND_BASE_UNITS,
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    domain: { name: x.assetName, version: x.assetVersion },
  };
  return { paymentRequired: { x402Version: 2, resource: { url: RESOURCE }, accepts: [entry] }, entry, terms };
}

/** One outbound authorization signed as the service signs it; its header's length (nothing is kept). */
export async function signOutboundOnce(x: X402Settings, key: `0x${string}`): Promise<number> {
  const signed = await signOutbound(x, key, { resource: RESOURCE, ...chosen(x) }, Math.floor(Date.now() / 1000));
  return signed.header.value.length;
}

/**
 * An authorization from the settlement address (which `npm run dev` funds), signed once per isolate
 * and never sent: what the step "the chain's check batch" hands `checkTransfer`, so the batch's gas
 * estimate runs a transfer that would succeed, as a settlement's does.
 */
let checked: { key: string; payment: DecodedPayment } | null = null;
export async function outboundPaymentOnce(x: X402Settings, key: `0x${string}`): Promise<DecodedPayment> {
  if (checked?.key === key) return checked.payment;
  const signed = await signOutbound(x, key, { resource: RESOURCE, ...chosen(x) }, Math.floor(Date.now() / 1000));
  const payment = decodePaymentHeader(signed.header.value);
  if (!payment) throw new Error("the service's own outbound header did not decode");
  checked = { key, payment };
  return payment;
}
