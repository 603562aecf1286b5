import { privateKeyToAddress } from "viem/accounts";
import { z } from "zod";
import { isHttps, issuesOf, type VarsOf, wholeNumberVar } from "../lib/settings";

const address = z.string().regex(/^0x[a-fA-F0-9]{40}$/, "must be an EVM address");

/** Gas keys the built-in facilitator takes at most (one settler object each). */
export const MAX_GAS_KEYS = 32;

/**
 * x402 and deposits are configured as a group: with X402_PAY_TO unset the
 * deployment takes no on-chain payments (x402 routes answer 503); once set,
 * everything the chosen facilitator needs must be present.
 */
export const x402Shape = {
  X402_NETWORK: z.string().min(1).default("base"),
  // An id, not a quantity: any positive integer a JavaScript number holds exactly, as before.
  X402_CHAIN_ID: wholeNumberVar({ min: 1, max: Number.MAX_SAFE_INTEGER, fallback: 8453 }),
  X402_ASSET: address,
  X402_ASSET_NAME: z.string().min(1).default("USD Coin"),
  X402_ASSET_VERSION: z.string().min(1).default("2"),
  X402_PAY_TO: address,
  X402_MAX_TIMEOUT_SECONDS: wholeNumberVar({ min: 30, max: 3600, fallback: 300 }),
  // The longest authorization window accepted, as the reference facilitator accepts any: a client may sign more
  // than the advertised maxTimeoutSeconds (a week at most: the reservation is kept, and watched, that long).
  X402_MAX_AUTHORIZATION_SECONDS: wholeNumberVar({ min: 30, max: 604_800, fallback: 86_400 }),
  X402_FACILITATOR_URL: z.string().url().optional(),
  X402_FACILITATOR_HEADERS: z.string().optional(),
  X402_FACILITATOR_TIMEOUT_MS: wholeNumberVar({ min: 1, max: 120_000, fallback: 30_000 }),
  // The SettlementBatch contract (contracts/SettlementBatch.sol, deployed once per chain): with it, the
  // built-in facilitator sends the authorizations that wait for one gas key together, up to the max per
  // transaction. Without it, one transaction per settlement.
  X402_SETTLEMENT_BATCH_ADDRESS: address.optional(),
  X402_SETTLEMENT_BATCH_MAX: wholeNumberVar({ min: 1, max: 100, fallback: 50 }),
  RPC_URL: z.string().url(),
  // What the RPC provider serves (docs/operations.md lists common providers' caps): the widest
  // eth_getLogs range in blocks, and the most calls in one JSON-RPC batch.
  RPC_MAX_LOG_RANGE: wholeNumberVar({ min: 1, max: 1_000_000, fallback: 1000 }),
  RPC_MAX_BATCH: wholeNumberVar({ min: 1, max: 10_000, fallback: 100 }),
  // The block the deployment started at: where a log search starts when the service recorded no
  // block of its own (rows from before recorded blocks). 0 suits a local chain; production sets it.
  CHAIN_START_BLOCK: wholeNumberVar({ min: 0, max: Number.MAX_SAFE_INTEGER, fallback: 0 }),
  // One gas key, or several separated by commas: each is a settlement lane of its own (docs/scaling.md).
  FACILITATOR_PRIVATE_KEY: z
    .string()
    .transform((keys) => keys.split(",").map((k) => k.trim()))
    .pipe(
      z
        .array(z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be 32-byte hex private keys, separated by commas"))
        .min(1)
        .max(MAX_GAS_KEYS)
        .refine((keys) => new Set(keys.map((k) => k.toLowerCase())).size === keys.length, "must not name a key twice"),
    )
    .optional(),
  // The receiving key: agents' deposit addresses, and the receiving address of each charge and checkout
  // link that binds an x402 authorization to what it pays. Without it a v1 payment would pay any charge.
  DEPOSIT_MNEMONIC: z
    .string({ error: "is required with x402: it derives the deposit and receiving addresses" })
    .trim()
    .refine((m) => m.split(/\s+/).length >= 12, "must be a BIP-39 mnemonic of 12 or more words"),
  DEPOSIT_CONFIRMATIONS: wholeNumberVar({ min: 0, max: 1000, fallback: 3 }),
  // The key of X402_PAY_TO, the settlement address: it signs the authorizations of payouts and x402
  // refunds (a gas key sends them). Without it the service takes money in but sends none out.
  SETTLEMENT_PRIVATE_KEY: z
    .string()
    .trim()
    .regex(/^0x[0-9a-fA-F]{64}$/, "must be a 32-byte hex private key")
    .optional(),
};

const X402Schema = z.object(x402Shape).superRefine((x, ctx) => {
  if (!x.X402_FACILITATOR_URL && !x.FACILITATOR_PRIVATE_KEY) {
    ctx.addIssue({
      code: "custom",
      message: "the built-in facilitator needs FACILITATOR_PRIVATE_KEY (or set X402_FACILITATOR_URL)",
    });
  }
  if (
    x.SETTLEMENT_PRIVATE_KEY &&
    privateKeyToAddress(x.SETTLEMENT_PRIVATE_KEY as `0x${string}`).toLowerCase() !== x.X402_PAY_TO.toLowerCase()
  ) {
    ctx.addIssue({ code: "custom", message: "SETTLEMENT_PRIVATE_KEY must be the key of X402_PAY_TO" });
  }
  if (x.X402_MAX_AUTHORIZATION_SECONDS < x.X402_MAX_TIMEOUT_SECONDS) {
    ctx.addIssue({
      code: "custom",
      message: "X402_MAX_AUTHORIZATION_SECONDS must be at least X402_MAX_TIMEOUT_SECONDS (the window the terms offer)",
    });
  }
});

export interface X402Settings {
  network: string;
  chainId: number;
  asset: `0x${string}`;
  assetName: string;
  assetVersion: string;
  payTo: `0x${string}`;
  maxTimeoutSeconds: number;
  /** The longest window (validBefore - now) an authorization may have, beyond the advertised maxTimeoutSeconds. */
  maxAuthorizationSeconds: number;
  facilitatorUrl: string | null;
  facilitatorHeaders: Record<string, string>;
  facilitatorTimeoutMs: number;
  rpcUrl: string;
  /** The widest eth_getLogs range (blocks) and the most calls in one JSON-RPC batch the provider serves. */
  maxLogRange: number;
  maxBatch: number;
  /** Where a log search starts when the service recorded no block of its own. */
  startBlock: number;
  /**
   * The contract through which the built-in facilitator settles several authorizations in one
   * transaction, and how many at most; null: one transaction per settlement.
   */
  settlementBatch: { address: `0x${string}`; max: number } | null;
  /** The built-in facilitator's gas keys, one settlement lane each (unused when X402_FACILITATOR_URL names a remote one). */
  facilitatorPrivateKeys: `0x${string}`[];
  /** The receiving key (BIP-39): deposit addresses on account 0, charges' and links' receiving addresses on account 1. */
  receivingMnemonic: string;
  depositConfirmations: number;
  /** The settlement address's key (payouts and x402 refunds); null: nothing is sent out. */
  settlementPrivateKey: `0x${string}` | null;
}

/** Null when X402_PAY_TO is unset: this deployment takes no on-chain payments. */
export function x402Settings(env: X402Vars & { ENVIRONMENT?: string }): X402Settings | null {
  if (!env.X402_PAY_TO) return null;
  const parsed = X402Schema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`Invalid x402 configuration: ${issuesOf(parsed.error)}`);
  }
  const x = parsed.data;
  if ((env.ENVIRONMENT ?? "production") === "production") {
    for (const name of ["X402_FACILITATOR_URL", "RPC_URL"] as const) {
      if (x[name] && !isHttps(x[name]))
        throw new Error(`Invalid x402 configuration: ${name} must be https in production`);
    }
  }
  let headers: Record<string, string> = {};
  if (x.X402_FACILITATOR_HEADERS) {
    // Never JSON.parse's own message: it quotes the text, which holds the facilitator's credentials.
    let json: unknown;
    try {
      json = JSON.parse(x.X402_FACILITATOR_HEADERS);
    } catch {
      json = undefined;
    }
    const h = z.record(z.string(), z.string()).safeParse(json);
    if (!h.success)
      throw new Error("Invalid x402 configuration: X402_FACILITATOR_HEADERS must be a JSON object of strings");
    headers = h.data;
  }
  return {
    network: x.X402_NETWORK,
    chainId: x.X402_CHAIN_ID,
    asset: x.X402_ASSET as `0x${string}`,
    assetName: x.X402_ASSET_NAME,
    assetVersion: x.X402_ASSET_VERSION,
    payTo: x.X402_PAY_TO as `0x${string}`,
    maxTimeoutSeconds: x.X402_MAX_TIMEOUT_SECONDS,
    maxAuthorizationSeconds: x.X402_MAX_AUTHORIZATION_SECONDS,
    facilitatorUrl: x.X402_FACILITATOR_URL ?? null,
    facilitatorHeaders: headers,
    facilitatorTimeoutMs: x.X402_FACILITATOR_TIMEOUT_MS,
    rpcUrl: x.RPC_URL,
    maxLogRange: x.RPC_MAX_LOG_RANGE,
    maxBatch: x.RPC_MAX_BATCH,
    startBlock: x.CHAIN_START_BLOCK,
    settlementBatch:
      x.X402_SETTLEMENT_BATCH_ADDRESS && x.X402_SETTLEMENT_BATCH_MAX > 1
        ? { address: x.X402_SETTLEMENT_BATCH_ADDRESS as `0x${string}`, max: x.X402_SETTLEMENT_BATCH_MAX }
        : null,
    facilitatorPrivateKeys: (x.FACILITATOR_PRIVATE_KEY ?? []) as `0x${string}`[],
    receivingMnemonic: x.DEPOSIT_MNEMONIC,
    depositConfirmations: x.DEPOSIT_CONFIRMATIONS,
    settlementPrivateKey: (x.SETTLEMENT_PRIVATE_KEY ?? null) as `0x${string}` | null,
  };
}

export type X402Vars = VarsOf<typeof x402Shape>;
