import { type Hex, parseSignature, toFunctionSelector } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { staticCall } from "../chain/abi-words";
import { type RpcAnswer, rpcBatch, rpcErrorMessage, shortError, tokenCall } from "../chain/client";
import type { X402Settings } from "../config/env";
import type { DecodedPayment } from "./payload";
import type { Terms } from "./terms";

/** A checked `transferWithAuthorization` (or another call), ready to be signed with the next nonce. */
export interface PreparedTransfer {
  /** The contract called; the token when absent (every settlement and outbound transfer). */
  to?: Hex;
  data: Hex;
  gas: bigint;
  fees: Fees;
}

export interface Fees {
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** What became of a settlement, however it was sent (alone, in a batch, or by a remote facilitator). */
export type SettleOutcome =
  | { kind: "settled"; transaction: `0x${string}` }
  /** Definitive: nothing moved on chain by this settlement (the caller asks the chain whether anyone else's did). */
  | { kind: "failed"; reason: string }
  /** The transfer may have happened; reconciliation against the chain decides. */
  | { kind: "unknown"; reason: string; transaction: `0x${string}` | null };

export type TransferCheck =
  /**
   * `block`: the head the batch was read at, where the authorization was still unused: nothing can
   * have used it before, so the search for its use starts there (null when the node gave none).
   */
  | { kind: "valid"; prepared: PreparedTransfer | null; block: number | null }
  | { kind: "invalid"; reason: string }
  | { kind: "unavailable"; reason: string };

/** How long one fee estimate serves the settlements that follow it (a block or two cannot outgrow its 1.2x headroom). */
const FEES_FRESH_MS = 2_000;
/**
 * How EIP-3009 tokens revert a transfer whose authorization is not signed by `from` (USDC's
 * "FiatTokenV2: invalid signature", the test token's too, and "invalid signature s" for a high s).
 */
const SIGNATURE_REVERT = /invalid signature/i;
const rpcError = (answer: RpcAnswer | undefined) => shortError(rpcErrorMessage(answer) ?? "no answer");

/** The gas-paying account, derived once per key and isolate (deriving costs a curve multiplication). */
const accounts = new Map<Hex, ReturnType<typeof privateKeyToAccount>>();
export function gasAccountOf(privateKey: Hex) {
  let account = accounts.get(privateKey);
  if (!account) {
    account = privateKeyToAccount(privateKey);
    accounts.set(privateKey, account);
  }
  return account;
}

/** Its selector worked out once, not per payment. */
const TRANSFER_WITH_AUTHORIZATION = toFunctionSelector(
  "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
);

/** The call that settles `payment`, or null when its signature is not a valid (r, s, v) or a field does not fit its type. */
export function transferCallData(payment: Pick<DecodedPayment, "authorization" | "signature">): Hex | null {
  const a = payment.authorization;
  let parts: ReturnType<typeof parseSignature>;
  try {
    parts = parseSignature(payment.signature);
  } catch {
    return null;
  }
  const v = parts.v ?? BigInt((parts.yParity ?? 0) + 27);
  return staticCall(TRANSFER_WITH_AUTHORIZATION, [
    a.from as Hex,
    a.to as Hex,
    BigInt(a.value),
    BigInt(a.validAfter),
    BigInt(a.validBefore),
    a.nonce as Hex,
    BigInt(v),
    parts.r,
    parts.s,
  ]);
}

/** One fee estimate per RPC URL and isolate, shared for FEES_FRESH_MS. */
const feeCache = new Map<string, { at: number; fees: Fees }>();
export const feeCalls: { method: string; params: unknown[] }[] = [
  { method: "eth_getBlockByNumber", params: ["latest", false] },
  { method: "eth_maxPriorityFeePerGas", params: [] },
];
/** The number of the block `eth_getBlockByNumber` answered (feeCalls' first), or null without one. */
export function blockNumberOf(block: RpcAnswer | undefined): number | null {
  const number = (block?.result as { number?: string } | null | undefined)?.number;
  return typeof number === "string" ? Number(BigInt(number)) : null;
}

/** viem's estimate: 1.2x the latest base fee plus the node's suggested tip. */
export function feesFrom(block: RpcAnswer, tip: RpcAnswer): Fees {
  const baseFee = BigInt((block.result as { baseFeePerGas?: string } | null)?.baseFeePerGas ?? "0x0");
  const maxPriorityFeePerGas = BigInt((tip.result as string | undefined) ?? "0x0");
  return { maxFeePerGas: (baseFee * 12n + 9n) / 10n + maxPriorityFeePerGas, maxPriorityFeePerGas };
}

/**
 * Everything the chain says about a payment before any of it is reserved, in one JSON-RPC batch:
 * the authorization's nonce is unused, the payer's balance covers it and, when `gasFrom` is given
 * (the built-in facilitator), the transfer itself runs: its gas estimate executes it against the
 * latest state, so one that would revert is refused here, before anything is broadcast. The fees
 * ride along when the shared estimate is stale. The result is what the settler signs and sends.
 */
export async function checkTransfer(
  x: X402Settings,
  terms: Terms,
  payment: DecodedPayment,
  gasFrom: Hex | null,
): Promise<TransferCheck> {
  const a = payment.authorization;
  const data = gasFrom ? transferCallData(payment) : null;
  if (gasFrom && !data) return { kind: "invalid", reason: "invalid_exact_evm_payload_signature" };
  const calls: { method: string; params: unknown[] }[] = [
    tokenCall(x, "authorizationState", [a.from, a.nonce]),
    tokenCall(x, "balanceOf", [a.from]),
    { method: "eth_blockNumber", params: [] },
  ];
  const cached = feeCache.get(x.rpcUrl);
  const feesFresh = cached && Date.now() - cached.at < FEES_FRESH_MS ? cached.fees : null;
  if (gasFrom) calls.push({ method: "eth_estimateGas", params: [{ from: gasFrom, to: x.asset, data }, "latest"] });
  if (gasFrom && !feesFresh) calls.push(...feeCalls);
  let answers: RpcAnswer[];
  try {
    answers = await rpcBatch(x, calls);
  } catch (error) {
    return { kind: "unavailable", reason: `rpc_unavailable: ${shortError(error)}` };
  }
  const [used, balance, head, estimate, block, tip] = answers as [
    RpcAnswer,
    RpcAnswer,
    RpcAnswer,
    RpcAnswer?,
    RpcAnswer?,
    RpcAnswer?,
  ];
  const seen = typeof head.result === "string" ? Number(BigInt(head.result)) : null;
  if (used.error || balance.error)
    return { kind: "unavailable", reason: `rpc_error: ${rpcError(used.error ? used : balance)}` };
  if (BigInt(used.result as string) !== 0n) return { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used" };
  if (BigInt(balance.result as string) < terms.value) return { kind: "invalid", reason: "insufficient_funds" };
  if (!gasFrom || !estimate) return { kind: "valid", prepared: null, block: seen };
  if (estimate.error) {
    const message = rpcError(estimate);
    // The dry run executes the transfer, whose own signature check (ecrecover against `from`) refused it.
    if (SIGNATURE_REVERT.test(message)) return { kind: "invalid", reason: "invalid_exact_evm_payload_signature" };
    return { kind: "invalid", reason: `simulation_failed: ${message}` };
  }
  let fees = feesFresh;
  if (!fees) {
    if (!block || !tip || block.error || tip.error)
      return { kind: "unavailable", reason: `rpc_error: ${rpcError(block?.error ? block : tip)}` };
    fees = feesFrom(block, tip);
    feeCache.set(x.rpcUrl, { at: Date.now(), fees });
  }
  return { kind: "valid", prepared: { data: data!, gas: BigInt(estimate.result as string), fees }, block: seen };
}
