import { getAddress, type Hex, isAddressEqual, zeroAddress } from "viem";
import type { X402Settings } from "../../config/env";
import { caip2 } from "../terms";
import {
  type AcceptsEntry,
  isBaseUnits,
  isHttpUrl,
  MAX_OUTBOUND_TIMEOUT_SECONDS,
  type PaymentRequired,
} from "./request";

/** What the service pays with: its chain, in both namings, and its token with the token's EIP-712 domain. */
export type OutboundChain = Pick<X402Settings, "network" | "chainId" | "asset" | "assetName" | "assetVersion"> & {
  /** The service's own addresses and the token's (`ownAddresses`): never a payee. */
  ownAddresses?: readonly Hex[];
};

/** The chosen entry's terms, checked and normalized: what the service signs. */
export interface PayableTerms {
  version: 1 | 2;
  scheme: "exact";
  /** As the entry names it: the v1 name (`base-sepolia`) or the v2 CAIP-2 id (`eip155:84532`). */
  network: string;
  /** Checksummed. */
  asset: Hex;
  payTo: Hex;
  /** Token base units: v1 `maxAmountRequired`, v2 `amount`. The service signs exactly this. */
  value: bigint;
  maxTimeoutSeconds: number;
  /** The token's EIP-712 domain (the entry's `extra`, equal to the service's token's). */
  domain: { name: string; version: string };
}

/** Why an entry on the service's scheme, network and asset cannot be paid. */
export type EntryProblem = "amount" | "max_timeout_seconds" | "pay_to" | "eip712_domain" | "resource";

/**
 * The outcome of choosing: `payable` (the first entry the service can pay; `entry` is the entry
 * exactly as received, which a v2 payment repeats); `invalid` (no entry payable, and the first on
 * the service's scheme, network and asset is malformed: the route answers 400 naming `problem`);
 * `unsupported` (no entry on the service's scheme, network and asset: 400
 * `unsupported_payment_requirements`).
 */
export type EntryChoice =
  | { kind: "payable"; index: number; entry: AcceptsEntry; terms: PayableTerms }
  | { kind: "invalid"; index: number; problem: EntryProblem }
  | { kind: "unsupported" };

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** The network name an entry of `version` must carry to be paid on the service's chain. */
export const outboundNetworkName = (x: OutboundChain, version: 1 | 2): string =>
  version === 1 ? x.network : caip2(x.chainId);

/** Whether an entry asks for the service's scheme, network and asset (whatever else it says). */
function onOurRails(x: OutboundChain, version: 1 | 2, entry: AcceptsEntry): boolean {
  return (
    entry.scheme === "exact" &&
    entry.network === outboundNetworkName(x, version) &&
    typeof entry.asset === "string" &&
    ADDRESS.test(entry.asset) &&
    isAddressEqual(entry.asset as Hex, x.asset)
  );
}

/** The entry's terms, or the first thing wrong with them. */
function termsOf(x: OutboundChain, version: 1 | 2, entry: AcceptsEntry): PayableTerms | EntryProblem {
  const amount = version === 1 ? entry.maxAmountRequired : entry.amount;
  if (typeof amount !== "string" || !isBaseUnits(amount)) return "amount";
  const timeout = entry.maxTimeoutSeconds;
  if (timeout === undefined || !Number.isInteger(timeout) || timeout <= 0 || timeout > MAX_OUTBOUND_TIMEOUT_SECONDS)
    return "max_timeout_seconds";
  const payTo = entry.payTo;
  if (typeof payTo !== "string" || !ADDRESS.test(payTo) || isAddressEqual(payTo as Hex, zeroAddress)) return "pay_to";
  // The settlement address paying itself moves nothing on chain, yet would debit the wallet; tokens paid
  // to the token, a contract of the service's or a gas key are lost or mixed with the service's own.
  if (x.ownAddresses?.some((own) => isAddressEqual(payTo as Hex, own))) return "pay_to";
  // A version 1 entry names its resource: one that is not a web URL cannot be checked against the agent's hosts.
  if (entry.resource !== undefined && !isHttpUrl(entry.resource)) return "resource";
  // A signature over another domain than the token's own would be refused by the token: nothing to pay with.
  const { name, version: domainVersion } = entry.extra ?? {};
  if (name !== x.assetName || domainVersion !== x.assetVersion) return "eip712_domain";
  return {
    version,
    scheme: "exact",
    network: entry.network,
    asset: getAddress(entry.asset as Hex),
    payTo: getAddress(payTo),
    value: BigInt(amount),
    maxTimeoutSeconds: timeout,
    domain: { name: x.assetName, version: x.assetVersion },
  };
}

/**
 * The first `accepts` entry the service can pay: scheme `exact`, the service's network (named as the
 * 402's version names networks) and its asset, with well-formed terms. A malformed entry on the
 * service's rails is passed over for a later good one; only when none is payable is it reported.
 */
export function choosePayableEntry(x: OutboundChain, paymentRequired: PaymentRequired): EntryChoice {
  const version = paymentRequired.x402Version;
  let firstProblem: { index: number; problem: EntryProblem } | null = null;
  for (const [index, entry] of paymentRequired.accepts.entries()) {
    if (!onOurRails(x, version, entry)) continue;
    const terms = termsOf(x, version, entry);
    if (typeof terms !== "string") return { kind: "payable", index, entry, terms };
    firstProblem ??= { index, problem: terms };
  }
  return firstProblem ? { kind: "invalid", ...firstProblem } : { kind: "unsupported" };
}

/** Whether the chosen amount is above the agent's own ceiling for this request (402 `over_max_amount`). */
export const overMaxAmount = (terms: PayableTerms, maxAmountBaseUnits: string | undefined): boolean =>
  maxAmountBaseUnits !== undefined && terms.value > BigInt(maxAmountBaseUnits);
