import { env } from "cloudflare:workers";
import type { Env } from "../../src/config/env";
import type { RelayedRequest } from "../setup/chain.global";
import { chain } from "./x402";

/*
 * Counting what the Worker sends to the chain: an env whose RPC_URL is the relay under a tag of the
 * test's own (test/setup/chain.global.ts), so its requests are recorded apart from every other
 * file's, which share the relay.
 */

/** A tag no other test uses. */
export const relayTag = () => `t${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;

/** The Worker's env talking to the chain through the relay under `tag`, with any other vars given. */
export const envThrough = (tag: string, vars: Record<string, string> = {}) =>
  ({ ...env, RPC_URL: `${chain().relayUrl}/t/${tag}`, ...vars }) as Env;

/** The requests sent under `tag` so far, in the order the relay got them. */
export async function relayedRequests(tag: string): Promise<RelayedRequest[]> {
  const res = await fetch(`${chain().relayUrl}/calls/${tag}`);
  return (await res.json()) as RelayedRequest[];
}

/** The eth_getLogs calls sent under `tag`, with their ranges, in order. */
export async function logSearches(tag: string) {
  return (await relayedRequests(tag))
    .flatMap((r) => r.calls)
    .filter((c) => c.method === "eth_getLogs")
    .map((c) => ({ from: c.fromBlock!, to: c.toBlock! }));
}
