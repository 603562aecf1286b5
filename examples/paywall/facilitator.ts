// What a merchant's middleware needs from the service: one call with the merchant key.

/** The answer of `GET /merchant/x402/facilitator`. */
export interface FacilitatorTerms {
  /** The facilitator's base URL: the middleware calls `/supported`, `/verify` and `/settle` below it. */
  facilitatorUrl: string;
  /** The merchant's own receiving address: payments to it land in the merchant's balance. */
  payTo: `0x${string}`;
  network: string;
  /** The stablecoin the service settles. */
  asset: `0x${string}`;
  /** The token's EIP-712 domain, which the payer signs over. */
  extra: { name: string; version: string };
}

/** The service's stablecoin has 6 decimals, like USDC: $1 is 1,000,000 base units. */
export const TOKEN_DECIMALS = 6;

export async function facilitatorTerms(serviceUrl: string, merchantKey: string): Promise<FacilitatorTerms> {
  const res = await fetch(`${serviceUrl.replace(/\/$/, "")}/merchant/x402/facilitator`, {
    headers: { authorization: `Bearer ${merchantKey}` },
  });
  if (res.status !== 200) throw new Error(`GET /merchant/x402/facilitator answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as FacilitatorTerms;
}

/** The merchant key as a bearer credential on every facilitator call, keyed by the call as both SDKs expect. */
export function authHeaders(merchantKey: string) {
  const headers = { Authorization: `Bearer ${merchantKey}` };
  return { verify: headers, settle: headers, supported: headers, list: headers, bazaar: headers };
}

// Version 1 names networks (`base-sepolia`), version 2 by CAIP-2 id (`eip155:84532`); the service's
// local chain has Base Sepolia's id. Only the chains the service settles on are listed.
const V1_NAMES: Record<string, string> = { "eip155:84532": "base-sepolia", "eip155:8453": "base" };

/** The network in both namings, whichever the service answered with. */
export function networkNames(network: string): { v1: string; v2: `${string}:${string}` } {
  const byName = Object.entries(V1_NAMES).find(([, name]) => name === network);
  const v2 = (byName ? byName[0] : network) as `${string}:${string}`;
  const v1 = V1_NAMES[v2];
  if (!v1 || !v2.startsWith("eip155:")) throw new Error(`no x402 network names for ${network}`);
  return { v1, v2 };
}

/** A dollar price such as `$0.001` in the token's base units, exactly (no floating point). */
export function baseUnitsOf(price: string): string {
  const match = /^\$?(\d+)(?:\.(\d+))?$/.exec(price);
  if (!match || (match[2]?.length ?? 0) > TOKEN_DECIMALS) throw new Error(`not a price in dollars: ${price}`);
  const fraction = (match[2] ?? "").padEnd(TOKEN_DECIMALS, "0");
  return (BigInt(match[1]!) * 10n ** BigInt(TOKEN_DECIMALS) + BigInt(fraction)).toString();
}
