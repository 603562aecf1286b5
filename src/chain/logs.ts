import { encodeEventTopics, type Hex, toHex } from "viem";
import { currentInvocation } from "../lib/invocation";
import { type ChainSettings, EIP3009_ABI, logRefusal, RpcTransportError, rpcCall } from "./client";

/*
 * Log searches as providers serve them: never one eth_getLogs over more blocks than the provider's
 * cap (RPC_MAX_LOG_RANGE), and never from block 0 unless the deployment's start block says so. A
 * search starts from a block the service recorded (when it sent the transaction, or first saw the
 * authorization), a little before it, and goes forward window by window to the head.
 */

/** What a log search needs to know: where the node is and the widest range it serves. */
export type LogSearch = Pick<ChainSettings, "rpcUrl" | "maxLogRange">;

/** A log as eth_getLogs answers it (hex quantities). */
export interface RpcLog {
  address: Hex;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex | null;
  transactionHash: Hex | null;
  logIndex: Hex | null;
  removed?: boolean;
}

/** What a log search is: a contract's events, by their topics (each position one value, any of several, or any). */
export interface LogFilter {
  address: Hex;
  topics: (Hex | Hex[] | null)[];
}

/**
 * How far before a recorded block a search starts. The block was read in the same batch as the state
 * it vouches for, but a provider balancing requests over several nodes may have answered it from one
 * a few blocks ahead of the other: the margin covers that.
 */
export const RECORDED_BLOCK_MARGIN = 100n;

/** Where a search for something the service recorded at `recorded` starts (the start block when none was). */
export function searchStart(x: Pick<ChainSettings, "startBlock">, recorded: number | bigint | null): bigint {
  if (recorded === null) return BigInt(x.startBlock);
  const from = BigInt(recorded) - RECORDED_BLOCK_MARGIN;
  return from > 0n ? from : 0n;
}

/** The windows of at most `max` blocks that cover `from`..`to` (both included), in order. */
export function* logWindows(from: bigint, to: bigint, max: number): Generator<{ from: bigint; to: bigint }> {
  const span = BigInt(Math.max(1, max));
  for (let start = from; start <= to; start += span) {
    const end = start + span - 1n;
    yield { from: start, to: end < to ? end : to };
  }
}

/**
 * One eth_getLogs of `filter` over `from`..`to`, which the caller keeps within the cap. A node's
 * refusal (a JSON-RPC error, an HTTP error: a range over its cap, a malformed filter) is logged
 * (logRefusal) and thrown; a request that got no answer is sent once more, then thrown.
 */
export async function getLogs(x: LogSearch, filter: LogFilter, from: bigint, to: bigint): Promise<RpcLog[]> {
  try {
    return await rpcCall<RpcLog[]>(
      x,
      "eth_getLogs",
      [{ address: filter.address, topics: filter.topics, fromBlock: toHex(from), toBlock: toHex(to) }],
      { retry: true },
    );
  } catch (error) {
    const transport = error instanceof RpcTransportError;
    if (!transport || error.status !== undefined)
      logRefusal(x, "eth_getLogs", error instanceof Error ? error.message : String(error), {
        fromBlock: Number(from),
        toBlock: Number(to),
      });
    throw error;
  }
}

/**
 * The logs of `filter` from block `from` to `to` (the head unless given), one eth_getLogs per window of
 * at most `maxLogRange` blocks, in order. With `found`, the search stops after the first window whose
 * logs satisfy it (what is looked for is there; later windows cannot change the answer). A search
 * longer than what the invocation may still send throws before the platform's limit would, rather
 * than answer from part of the range.
 */
export async function searchLogs(
  x: LogSearch,
  filter: LogFilter,
  from: bigint,
  { to, found }: { to?: bigint; found?: (logs: RpcLog[]) => boolean } = {},
): Promise<RpcLog[]> {
  const head = to ?? BigInt(await rpcCall<string>(x, "eth_blockNumber", [], { retry: true }));
  const logs: RpcLog[] = [];
  for (const window of logWindows(from, head, x.maxLogRange)) {
    if (!currentInvocation().left({ subrequests: 1 }))
      throw new Error(`eth_getLogs: the invocation's subrequests ran out at block ${window.from} of ${from}..${head}`);
    const part = await getLogs(x, filter, window.from, window.to);
    logs.push(...part);
    if (found?.(part)) break;
  }
  return logs;
}

export type AuthorizationFate =
  | { kind: "used"; transaction: `0x${string}` }
  | { kind: "canceled" }
  /** Nothing in reach yet (a node whose logs lag its state). */
  | { kind: "unseen" };

/**
 * What the token's logs say became of a used authorization: the transaction that used it
 * (AuthorizationUsed), a cancellation by its signer (AuthorizationCanceled, USDC's
 * `cancelAuthorization`), or nothing in reach yet. The search runs from `recorded` (the block at
 * which the service sent the transfer or first saw the authorization; null for rows from before it
 * was recorded: the start block) to the head, window by window, and stops at the first window that
 * holds one. A node's refusal is thrown (and logged), never read as "unseen".
 */
export async function authorizationFate(
  x: ChainSettings,
  authorizer: `0x${string}`,
  nonce: `0x${string}`,
  recorded: number | bigint | null,
): Promise<AuthorizationFate> {
  const [usedTopic, authorizerTopic, nonceTopic] = encodeEventTopics({
    abi: EIP3009_ABI,
    eventName: "AuthorizationUsed",
    args: { authorizer, nonce },
  });
  const [canceledTopic] = encodeEventTopics({ abi: EIP3009_ABI, eventName: "AuthorizationCanceled" });
  const logs = await searchLogs(
    x,
    { address: x.asset, topics: [[usedTopic!, canceledTopic!], authorizerTopic!, nonceTopic!] },
    searchStart(x, recorded),
    { found: (part) => part.length > 0 },
  );
  const used = logs.find((log) => log.topics[0] === usedTopic);
  if (used?.transactionHash) return { kind: "used", transaction: used.transactionHash };
  return logs.length > 0 ? { kind: "canceled" } : { kind: "unseen" };
}
