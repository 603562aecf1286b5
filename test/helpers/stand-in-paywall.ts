import { v1Entry, v2Entry } from "./paywall-terms";
import { receiverUrl } from "./webhooks";

/*
 * Paywalls the test receiver stands in for (test/setup/receiver.global.ts, /resource/paywall): a
 * 402 with the terms its URL carries, then 200 once a request carries a payment header. They check
 * no payment: the tests read what was sent (GET /received/<name>).
 */

export const b64 = (value: unknown) => btoa(JSON.stringify(value));

/** A stand-in paywall's URL and the name its requests are recorded under. */
export function paywall(options: { version?: 1 | 2; amount?: string; forever?: boolean } = {}) {
  const name = `res-${crypto.randomUUID()}`;
  const base = `${receiverUrl()}/resource/paywall?name=${name}${options.forever ? "&forever=1" : ""}`;
  const amount = options.amount ?? "1000";
  const terms =
    options.version === 1
      ? { x402Version: 1, error: "X-PAYMENT header is required", accepts: [v1Entry(amount, { resource: base })] }
      : { x402Version: 2, resource: { url: base }, accepts: [v2Entry(amount)] };
  const url = `${base}&terms=${encodeURIComponent(b64(terms))}${options.version === 1 ? "&v=1" : ""}`;
  return { url, name };
}
