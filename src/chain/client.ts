import {
  createPublicClient,
  decodeFunctionResult,
  defineChain,
  encodeFunctionData,
  formatTransactionReceipt,
  type Hex,
  http,
  isAddressEqual,
  type PublicClient,
  parseEventLogs,
  prepareEncodeFunctionData,
  type RpcTransactionReceipt,
} from "viem";
import { currentInvocation } from "../lib/invocation";
import { log } from "../lib/log";

/**
 * What the chain client needs to know of the deployment's chain: the x402 settings carry it, and
 * anything else that talks to the same chain can pass the same fields.
 */
export interface ChainSettings {
  chainId: number;
  network: string;
  rpcUrl: string;
  /** The stablecoin contract (EIP-3009). */
  asset: `0x${string}`;
  /** The widest eth_getLogs range in blocks the provider serves (RPC_MAX_LOG_RANGE). */
  maxLogRange: number;
  /** The most calls in one JSON-RPC batch the provider serves (RPC_MAX_BATCH). */
  maxBatch: number;
  /** Where a log search starts when the service recorded no block of its own (CHAIN_START_BLOCK). */
  startBlock: number;
}

/** What sending a JSON-RPC request needs: the URL alone (the CLI's verifiers have nothing else). */
export type RpcEndpoint = Pick<ChainSettings, "rpcUrl">;

/** The part of the EIP-3009 token the service uses. */
export const EIP3009_ABI = [
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ type: "uint256" }],
  },
  {
    type: "function",
    name: "authorizationState",
    stateMutability: "view",
    inputs: [
      { name: "authorizer", type: "address" },
      { name: "nonce", type: "bytes32" },
    ],
    outputs: [{ type: "bool" }],
  },
  {
    type: "function",
    name: "transferWithAuthorization",
    stateMutability: "nonpayable",
    inputs: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
      { name: "v", type: "uint8" },
      { name: "r", type: "bytes32" },
      { name: "s", type: "bytes32" },
    ],
    outputs: [],
  },
  {
    type: "event",
    name: "Transfer",
    inputs: [
      { name: "from", type: "address", indexed: true },
      { name: "to", type: "address", indexed: true },
      { name: "value", type: "uint256", indexed: false },
    ],
  },
  {
    type: "event",
    name: "AuthorizationUsed",
    inputs: [
      { name: "authorizer", type: "address", indexed: true },
      { name: "nonce", type: "bytes32", indexed: true },
    ],
  },
  {
    type: "event",
    name: "AuthorizationCanceled",
    inputs: [
      { name: "authorizer", type: "address", indexed: true },
      { name: "nonce", type: "bytes32", indexed: true },
    ],
  },
] as const;

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

export const chainOf = (x: ChainSettings) =>
  defineChain({
    id: x.chainId,
    name: x.network,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [x.rpcUrl] } },
  });

const clients = new Map<string, PublicClient>();

/** One JSON-RPC client per RPC URL and chain, reused across requests in an isolate. */
export function publicClientOf(x: ChainSettings): PublicClient {
  const key = `${x.chainId}:${x.rpcUrl}`;
  let client = clients.get(key);
  if (!client) {
    client = createPublicClient({
      chain: chainOf(x),
      transport: http(x.rpcUrl, { timeout: 10_000, retryCount: 1 }),
      pollingInterval: 250,
      cacheTime: 0,
    }) as PublicClient;
    clients.set(key, client);
  }
  return client;
}

const RPC_TIMEOUT_MS = 10_000;

export type RpcAnswer = { result?: unknown; error?: { message?: string } };

/**
 * The request, or its HTTP answer, failed before the node said anything about the call. `status`:
 * the HTTP status of an answer that was an error without a JSON-RPC one (a provider refusing a
 * request it will not serve answers so too); absent when nothing answered.
 */
export class RpcTransportError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * A node's answer that refuses a log search or a batch (a range or a batch over the provider's cap,
 * a malformed request) is an error someone must look at, never a quiet wait: logged with the method
 * and the node's own message. Never the URL, which often holds the provider's key: it is cut out of
 * the message should the node quote it.
 */
export function logRefusal(x: RpcEndpoint, method: string, message: string, fields: Record<string, unknown> = {}) {
  log.error("rpc_refused", { method, message: message.split(x.rpcUrl).join("[RPC_URL]").slice(0, 300), ...fields });
}

/** The JSON-RPC error message in an answer, if it is an error. */
export const rpcErrorMessage = (body: unknown) => (body as RpcAnswer | null)?.error?.message;

/**
 * Posts one JSON-RPC payload and returns the parsed answer. The body is always read to the end
 * (the connection goes back to the pool); an HTTP error that carries a JSON-RPC error is that
 * error, so the node's own message ("nonce too low") reaches the caller whatever the status.
 */
async function postRpc(x: RpcEndpoint, payload: unknown): Promise<unknown> {
  let status: number;
  let text: string;
  try {
    // A connection slot of this invocation first; the timeout counts from the send, not the queue.
    ({ status, text } = await currentInvocation().withSlot(async () => {
      const response = await fetch(x.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(RPC_TIMEOUT_MS),
      });
      return { status: response.status, text: await response.text() };
    }));
  } catch (error) {
    throw new RpcTransportError(`RPC unreachable: ${shortError(error)}`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new RpcTransportError(`RPC answered HTTP ${status} without JSON`, status);
  }
  if ((status < 200 || status > 299) && !rpcErrorMessage(body))
    throw new RpcTransportError(`RPC answered HTTP ${status}`, status);
  return body;
}

/**
 * Several JSON-RPC calls in one HTTP request: one round trip and one request for the node to
 * parse. The service's own calls on the settlement path go this way, not through viem's client:
 * the same request without the client's per-call work (a timeout error built up front for each call).
 * More calls than the provider takes in one batch (`maxBatch`) go as several requests, each through a
 * connection slot of the invocation; the answers come back in the calls' order. A request the node
 * refuses as a whole (too many calls, an HTTP error) is logged (logRefusal) and thrown.
 */
export async function rpcBatch(
  x: Pick<ChainSettings, "rpcUrl" | "maxBatch">,
  calls: { method: string; params: unknown[] }[],
): Promise<RpcAnswer[]> {
  const chunks: { method: string; params: unknown[] }[][] = [];
  for (let i = 0; i < calls.length; i += x.maxBatch) chunks.push(calls.slice(i, i + x.maxBatch));
  return (await Promise.all(chunks.map((chunk) => batchRequest(x, chunk)))).flat();
}

async function batchRequest(x: RpcEndpoint, calls: { method: string; params: unknown[] }[]): Promise<RpcAnswer[]> {
  const methods = [...new Set(calls.map((c) => c.method))].join(",");
  let answers: unknown;
  try {
    answers = await postRpc(
      x,
      calls.map((c, id) => ({ jsonrpc: "2.0", id, ...c })),
    );
  } catch (error) {
    if (error instanceof RpcTransportError && error.status !== undefined)
      logRefusal(x, "batch", error.message, { methods, calls: calls.length });
    throw error;
  }
  if (!Array.isArray(answers)) {
    const message = rpcErrorMessage(answers) ?? "RPC answered a batch with something else";
    logRefusal(x, "batch", message, { methods, calls: calls.length });
    throw new Error(`batch: ${message}`);
  }
  const byId = new Map((answers as (RpcAnswer & { id: number })[]).map((a) => [a.id, a]));
  return calls.map((_, id) => byId.get(id) ?? { error: { message: "no answer in the batch" } });
}

/**
 * One JSON-RPC call: its result, or an error carrying the node's own message (the settler reads
 * "nonce too low" in it). `retry` sends a read once more when the request itself failed (no
 * answer, a timeout, an HTTP error without a JSON-RPC one); a send is never retried, since the
 * node may have taken it.
 */
export async function rpcCall<T = unknown>(
  x: RpcEndpoint,
  method: string,
  params: unknown[],
  { retry = false } = {},
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      const answer = (await postRpc(x, { jsonrpc: "2.0", id: 1, method, params })) as RpcAnswer | null;
      const message = rpcErrorMessage(answer);
      if (answer?.error) throw new Error(`${method}: ${message ?? "error without a message"}`);
      if (!answer || !("result" in answer)) throw new Error(`${method}: no result`);
      return answer.result as T;
    } catch (error) {
      if (retry && attempt === 0 && error instanceof RpcTransportError) continue;
      throw error;
    }
  }
}

/**
 * The receipt of `hash`, polled by this request alone until `timeoutMs`: at once, then after
 * 25, 50, 100 and 200 ms, then every `intervalMs`. A chain that mines on arrival (the local one)
 * has the receipt within milliseconds, so the first waits are short; a chain with 2-second blocks
 * pays four extra reads per settlement. Not viem's waitForTransactionReceipt: its block watcher
 * is shared by every caller of the client in the isolate, and in a Worker the watcher dies with
 * the request that started it, leaving the others waiting out their timeout. Nor its
 * getTransactionReceipt, which makes a receipt not there yet an exception (with a long message it
 * formats): the node's null answer says the same for nothing.
 */
export async function receiptWithin(x: ChainSettings, hash: `0x${string}`, timeoutMs: number, intervalMs = 250) {
  const receipt = await receiptBy(x, hash, timeoutMs, intervalMs);
  if (!receipt) throw new Error(`no receipt for ${hash} within ${timeoutMs} ms`);
  return receipt;
}

/** As receiptWithin, null when the deadline passes with no receipt. */
async function receiptBy(x: ChainSettings, hash: `0x${string}`, timeoutMs: number, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  for (let wait = RECEIPT_FIRST_WAIT_MS; ; wait = Math.min(wait * 2, intervalMs)) {
    const receipt = await rpcCall<RpcTransactionReceipt | null>(x, "eth_getTransactionReceipt", [hash], {
      retry: true,
    });
    if (receipt) return formatTransactionReceipt(receipt);
    if (Date.now() + wait > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/**
 * How long the cron reads the receipt of a transaction it has just sent: a node that mines on arrival
 * (the local chain) or a chain with sub-second blocks answers within it, at a few reads; anything
 * slower is left for the next run, which reads it once.
 */
export const JUST_SENT_RECEIPT_MS = 1_000;

/** Reads `receiptWithin` takes at most over JUST_SENT_RECEIPT_MS: at 0, 25, 75, 175, 375, 625 and 875 ms. */
export const JUST_SENT_RECEIPT_READS = 7;

/** The receipt of a transaction just sent, read for at most JUST_SENT_RECEIPT_MS; null when not mined by then. */
export const receiptOfJustSent = (x: ChainSettings, hash: `0x${string}`) => receiptBy(x, hash, JUST_SENT_RECEIPT_MS);

/** The receipt of `hash` now, or null when the node has none (not mined, or never seen). */
export async function receiptNow(x: ChainSettings, hash: `0x${string}`) {
  const receipt = await rpcCall<RpcTransactionReceipt | null>(x, "eth_getTransactionReceipt", [hash], { retry: true });
  return receipt ? formatTransactionReceipt(receipt) : null;
}

/** The token's reads with their selectors worked out once (each is a keccak of the signature otherwise). */
const TOKEN_READS = {
  authorizationState: prepareEncodeFunctionData({ abi: EIP3009_ABI, functionName: "authorizationState" }),
  balanceOf: prepareEncodeFunctionData({ abi: EIP3009_ABI, functionName: "balanceOf" }),
};

/** A read of the token at `block` (the latest by default), as one JSON-RPC call (alone, or in a batch). */
export const tokenCall = (
  x: ChainSettings,
  functionName: "authorizationState" | "balanceOf",
  args: readonly unknown[],
  block = "latest",
) => ({
  method: "eth_call",
  params: [
    {
      to: x.asset,
      data: encodeFunctionData({ ...TOKEN_READS[functionName], args } as Parameters<typeof encodeFunctionData>[0]),
    },
    block,
  ],
});

/** Whether the token marks `payer`'s authorization `nonce` used, at the latest block. */
export async function authorizationUsed(x: ChainSettings, payer: string, nonce: string): Promise<boolean> {
  const { method, params } = tokenCall(x, "authorizationState", [payer, nonce]);
  const result = await rpcCall<Hex>(x, method, params, { retry: true });
  return decodeFunctionResult({ abi: EIP3009_ABI, functionName: "authorizationState", data: result });
}

/** The first wait between receipt reads; each later one doubles, up to the interval. */
const RECEIPT_FIRST_WAIT_MS = 25;

/** The first line of an error's message, at most 200 characters (viem's short message when it has one). */
export function shortError(error: unknown): string {
  const text =
    error instanceof Error ? ((error as { shortMessage?: string }).shortMessage ?? error.message) : String(error);
  return text.split("\n")[0]!.slice(0, 200);
}

export type Receipt = NonNullable<Awaited<ReturnType<typeof receiptNow>>>;

/** Did this mined transaction move exactly `value` of the token from `from` to `to`? */
export function movedBy(
  x: ChainSettings,
  receipt: Receipt,
  transfer: { from: `0x${string}`; to: `0x${string}`; value: bigint },
): boolean {
  if (receipt.status !== "success") return false;
  const transfers = parseEventLogs({
    abi: EIP3009_ABI,
    eventName: "Transfer",
    logs: receipt.logs.filter((l) => isAddressEqual(l.address, x.asset)),
  });
  return transfers.some(
    (t) =>
      isAddressEqual(t.args.from, transfer.from) &&
      isAddressEqual(t.args.to, transfer.to) &&
      t.args.value === transfer.value,
  );
}

/**
 * The token balances of `addresses` at one block (`block` as a hex number), in order: JSON-RPC
 * batches of `eth_call balanceOf` (rpcBatch: `maxBatch` reads a request, at most the invocation's
 * connection slots in flight), never a request per address. Every read names the same block, so the
 * figures add up to one moment of the chain. Throws when any read fails: a partial sum would look
 * like a shortfall.
 */
export async function tokenBalancesAt(x: ChainSettings, addresses: readonly string[], block: Hex): Promise<bigint[]> {
  const answers = await rpcBatch(
    x,
    addresses.map((a) => tokenCall(x, "balanceOf", [a], block)),
  );
  return answers.map((answer, i) => {
    if (answer.error || typeof answer.result !== "string")
      throw new Error(`balanceOf ${addresses[i]}: ${answer.error?.message ?? "no result"}`);
    return BigInt(answer.result === "0x" ? 0 : answer.result);
  });
}
