import { env } from "cloudflare:workers";
import { settingsOf } from "../../src/config/env";
import { caip2 } from "../../src/x402/terms";

/*
 * What a seller's 402 says, on the service's own network and asset: the terms the tests hand to
 * POST /agent/x402/payments (and to the stand-in paywalls), in both versions of the protocol.
 */

const x = () => settingsOf(env).x402!;

/** A seller's address nobody in the tests holds a key of. */
export const PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
export const REPORT_URL = "https://api.example/report";

/** A version 2 `accepts` entry for `amount` base units, 300 s to settle, `over` on top. */
export const v2Entry = (amount: string, over: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: caip2(x().chainId),
  amount,
  asset: x().asset,
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: x().assetName, version: x().assetVersion },
  ...over,
});

/** A version 1 `accepts` entry (maxAmountRequired, the resource inside), 60 s to settle, `over` on top. */
export const v1Entry = (amount: string, over: Record<string, unknown> = {}) => ({
  scheme: "exact",
  network: x().network,
  maxAmountRequired: amount,
  resource: REPORT_URL,
  asset: x().asset,
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { name: x().assetName, version: x().assetVersion },
  ...over,
});

/** The body of POST /agent/x402/payments for a version 1 402 with one entry. */
export const v1Request = (amount: string, over: Record<string, unknown> = {}, resource = REPORT_URL) => ({
  resource,
  paymentRequired: { x402Version: 1, accepts: [v1Entry(amount, { resource, ...over })] },
});

/** The body of POST /agent/x402/payments for a version 2 402 with one entry. */
export const v2Request = (amount: string, over: Record<string, unknown> = {}, resource = REPORT_URL) => ({
  resource,
  paymentRequired: { x402Version: 2, resource: { url: resource }, accepts: [v2Entry(amount, over)] },
});
