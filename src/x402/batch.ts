import {
  decodeAbiParameters,
  decodeErrorResult,
  type Hex,
  isAddressEqual,
  pad,
  toEventSelector,
  toFunctionSelector,
} from "viem";
import { addressAndBytesArrayCall } from "../chain/abi-words";
import type { Receipt } from "../chain/client";
import type { X402Settings } from "../config/env";
import type { Fees, PreparedTransfer, SettleOutcome } from "./transfer";

/*
 * Several x402 settlements in one transaction (contracts/SettlementBatch.sol): the contract calls
 * the token's transferWithAuthorization once per authorization and lets each call fail on its own.
 * What happened to each authorization is read from the token's own AuthorizationUsed event in the
 * receipt, never from the transaction's status, which says only that the batch ran.
 */

/** The ABI of contracts/SettlementBatch.sol. */
export const SETTLEMENT_BATCH_ABI = [
  {
    type: "function",
    name: "settle",
    stateMutability: "nonpayable",
    inputs: [
      { name: "token", type: "address" },
      { name: "calls", type: "bytes[]" },
    ],
    outputs: [],
  },
  {
    type: "event",
    name: "Failed",
    anonymous: false,
    inputs: [
      { name: "index", type: "uint256", indexed: true },
      { name: "reason", type: "bytes", indexed: false },
    ],
  },
] as const;

const SETTLE = toFunctionSelector("settle(address,bytes[])");
const AUTHORIZATION_USED = toEventSelector("AuthorizationUsed(address,bytes32)");
const TRANSFER = toEventSelector("Transfer(address,address,uint256)");
const FAILED = toEventSelector("Failed(uint256,bytes)");
/** What a call costs inside the batch beyond the token's own work: the loop, the copy, the call, a Failed log. */
const GAS_PER_CALL_IN_BATCH = 15_000n;

/** One checked settlement waiting for its turn in a batch. */
export interface BatchedAuthorization {
  /** Its transferWithAuthorization call, as checkTransfer built and estimated it. */
  data: Hex;
  gas: bigint;
  fees: Fees;
  /** The payer and the authorization's nonce: what the token's AuthorizationUsed names. */
  from: Hex;
  nonce: Hex;
  /**
   * What the authorization must move, when the caller wants it proven in the receipt (an outbound
   * transfer, whose payee and value are the service's own): settled only with a Transfer of exactly
   * this from `from`, each Transfer log standing for one item only.
   */
  moves?: { to: Hex; value: bigint };
}

/**
 * The one transaction that settles `items`: a lone authorization goes straight to the token, as a
 * single settlement does; several go through the batch contract. Gas is the sum of the items' own
 * estimates (each with a whole transaction's base cost, which covers the batch's), plus the
 * batch's work per call; fees are the highest any item was checked with.
 */
export function batchTransfer(x: X402Settings, items: BatchedAuthorization[]): PreparedTransfer {
  const fees = { ...items[0]!.fees };
  for (const { fees: f } of items) {
    if (f.maxFeePerGas > fees.maxFeePerGas) fees.maxFeePerGas = f.maxFeePerGas;
    if (f.maxPriorityFeePerGas > fees.maxPriorityFeePerGas) fees.maxPriorityFeePerGas = f.maxPriorityFeePerGas;
  }
  if (items.length === 1 || !x.settlementBatch) return { data: items[0]!.data, gas: items[0]!.gas, fees };
  const gas = items.reduce((sum, i) => sum + i.gas + GAS_PER_CALL_IN_BATCH, 0n);
  return {
    to: x.settlementBatch.address,
    // Every item's data was encoded here (transferCallData), so it always fits.
    data: addressAndBytesArrayCall(
      SETTLE,
      x.asset,
      items.map((i) => i.data),
    )!,
    gas,
    fees,
  };
}

const usedKey = (from: Hex, nonce: Hex) => `${pad(from).toLowerCase()}:${nonce.toLowerCase()}`;

/**
 * What the mined transaction `receipt` did with each of `items`, in order: settled when the token
 * logged that authorization's AuthorizationUsed in it (and, for an item that names what it `moves`,
 * a Transfer of exactly that, not already counted for another item; used without one is unknown,
 * for the chain to decide); failed otherwise, with the token's revert reason when the batch
 * contract reported one.
 */
export function outcomesIn(x: X402Settings, receipt: Receipt, items: BatchedAuthorization[]): SettleOutcome[] {
  const used = new Set<string>();
  const reasons = new Map<number, string>();
  /** The token's Transfer logs, counted by (from, to, value): each proves one item's movement. */
  const moved = new Map<string, number>();
  if (receipt.status === "success") {
    for (const log of receipt.logs) {
      const [topic, a, b] = log.topics;
      if (topic === AUTHORIZATION_USED && a && b && isAddressEqual(log.address, x.asset))
        used.add(`${a}:${b}`.toLowerCase());
      if (topic === TRANSFER && a && b && isAddressEqual(log.address, x.asset)) {
        const key = movedKey(a, b, log.data === "0x" ? 0n : BigInt(log.data));
        moved.set(key, (moved.get(key) ?? 0) + 1);
      }
      if (topic === FAILED && a && x.settlementBatch && isAddressEqual(log.address, x.settlementBatch.address))
        reasons.set(Number(BigInt(a)), revertMessage(log.data));
    }
  }
  return items.map((item, index): SettleOutcome => {
    if (!used.has(usedKey(item.from, item.nonce)))
      return { kind: "failed", reason: `transaction_reverted${reasons.has(index) ? `: ${reasons.get(index)}` : ""}` };
    if (item.moves) {
      const key = movedKey(pad(item.from), pad(item.moves.to), item.moves.value);
      const left = moved.get(key) ?? 0;
      // Used without moving the value: a token that behaves otherwise than EIP-3009 says; the chain decides later.
      if (left === 0)
        return {
          kind: "unknown",
          reason: "authorization_used_without_transfer",
          transaction: receipt.transactionHash,
        };
      moved.set(key, left - 1);
    }
    return { kind: "settled", transaction: receipt.transactionHash };
  });
}

/** A Transfer by its topics (from and to, 32 bytes each) and value. */
const movedKey = (from: Hex, to: Hex, value: bigint) => `${from}:${to}:${value}`.toLowerCase();

/** The message of a call's revert data (a `require`'s Error(string)), or its selector when it is something else. */
function revertMessage(data: Hex): string {
  try {
    const [reason] = decodeAbiParameters([{ type: "bytes" }], data);
    if (reason === "0x") return "no reason";
    try {
      const decoded = decodeErrorResult({ data: reason });
      return String(decoded.args?.[0] ?? decoded.errorName).slice(0, 200);
    } catch {
      return reason.slice(0, 10);
    }
  } catch {
    return "unreadable reason";
  }
}
