import { env } from "cloudflare:workers";
import { settingsOf } from "../../src/config/env";
import { caip2 } from "../../src/x402/terms";
import { receiverUrl } from "./webhooks";

/*
 * Paywalls the test receiver stands in for (test/setup/receiver.global.ts, /resource/paywall): a
 * 402 with the terms its URL carries, then 200 once a request carries a payment header. They check
 * no payment: the tests read what was sent (GET /received/<name>).
 */

const x = () => settingsOf(env).x402!;
export const PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";

/** A version 2 `accepts` entry on the service's network and asset. */
export const entry = (amount: string) => ({
  scheme: "exact",
  network: caip2(x().chainId),
  amount,
  asset: x().asset,
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: x().assetName, version: x().assetVersion },
});
const v1Entry = (amount: string, resource: string) => ({
  scheme: "exact",
  network: x().network,
  maxAmountRequired: amount,
  resource,
  asset: x().asset,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { name: x().assetName, version: x().assetVersion },
});
export const b64 = (value: unknown) => btoa(JSON.stringify(value));

/** A stand-in paywall's URL and the name its requests are recorded under. */
export function paywall(options: { version?: 1 | 2; amount?: string; forever?: boolean } = {}) {
  const name = `res-${crypto.randomUUID()}`;
  const base = `${receiverUrl()}/resource/paywall?name=${name}${options.forever ? "&forever=1" : ""}`;
  const amount = options.amount ?? "1000";
  const terms =
    options.version === 1
      ? { x402Version: 1, error: "X-PAYMENT header is required", accepts: [v1Entry(amount, base)] }
      : { x402Version: 2, resource: { url: base }, accepts: [entry(amount)] };
  const url = `${base}&terms=${encodeURIComponent(b64(terms))}${options.version === 1 ? "&v=1" : ""}`;
  return { url, name };
}
