import { createPublicClient, defineChain, formatTransactionReceipt, http, type PublicClient, type RpcTransactionReceipt } from "viem";
import type { X402Settings } from "../env";

/** The part of the EIP-3009 token the service uses. */
export const EIP3009_ABI = [
  { type: "function", name: "balanceOf", stateMutability: "view", inputs: [{ name: "account", type: "address" }], outputs: [{ type: "uint256" }] },
  {
    type: "function",
    name: "authorizationState",
    stateMutability: "view",
    inputs: [{ name: "authorizer", type: "address" }, { name: "nonce", type: "bytes32" }],
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
    inputs: [{ name: "from", type: "address", indexed: true }, { name: "to", type: "address", indexed: true }, { name: "value", type: "uint256", indexed: false }],
  },
  {
    type: "event",
    name: "AuthorizationUsed",
    inputs: [{ name: "authorizer", type: "address", indexed: true }, { name: "nonce", type: "bytes32", indexed: true }],
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

export const chainOf = (x: X402Settings) =>
  defineChain({ id: x.chainId, name: x.network, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [x.rpcUrl] } } });

const clients = new Map<string, PublicClient>();

/** One JSON-RPC client per RPC URL and chain, reused across requests in an isolate. */
export function publicClientOf(x: X402Settings): PublicClient {
  const key = `${x.chainId}:${x.rpcUrl}`;
  let client = clients.get(key);
  if (!client) {
    client = createPublicClient({ chain: chainOf(x), transport: http(x.rpcUrl, { timeout: 10_000, retryCount: 1 }), pollingInterval: 250, cacheTime: 0 }) as PublicClient;
    clients.set(key, client);
  }
  return client;
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
export async function receiptWithin(x: X402Settings, hash: `0x${string}`, timeoutMs: number, intervalMs = 250) {
  const client = publicClientOf(x);
  const deadline = Date.now() + timeoutMs;
  for (let wait = RECEIPT_FIRST_WAIT_MS; ; wait = Math.min(wait * 2, intervalMs)) {
    const receipt = await client.request({ method: "eth_getTransactionReceipt", params: [hash] });
    if (receipt) return formatTransactionReceipt(receipt as RpcTransactionReceipt);
    if (Date.now() + wait > deadline) throw new Error(`no receipt for ${hash} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/** The first wait between receipt reads; each later one doubles, up to the interval. */
const RECEIPT_FIRST_WAIT_MS = 25;

/** The first line of an error's message, at most 200 characters (viem's short message when it has one). */
export function shortError(error: unknown): string {
  const text = error instanceof Error ? ((error as { shortMessage?: string }).shortMessage ?? error.message) : String(error);
  return text.split("\n")[0]!.slice(0, 200);
}
