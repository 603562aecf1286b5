// How `npm run dev`'s service reaches its chain (docs/operations.md#local): the local chain itself by
// default; DEV_RPC_URL, any JSON-RPC URL in front of it (a proxy that holds it to a provider's limits);
// DEV_RPC_PROXY=1, such a proxy started here (scripts/lib/rpc-proxy.mjs) on DEV_RPC_PROXY_PORT.
import { DEFAULT_MAX_BATCH, DEFAULT_MAX_LOG_RANGE, startRpcProxy } from "./rpc-proxy.mjs";

/** With DEV_RPC_PROXY and no DEV_CHAIN_HISTORY, a new chain's empty blocks: three times the default range cap. */
export const PROXY_HISTORY = 3 * DEFAULT_MAX_LOG_RANGE;

/** A whole-number variable of `env`, or `fallback` when unset; throws naming it when it is not one. */
function whole(env, name, fallback) {
  const value = env[name];
  if (value === undefined || value === "") return fallback;
  if (!/^\d+$/.test(value)) throw new Error(`${name} is a whole number, not ${JSON.stringify(value)}`);
  return Number(value);
}

/**
 * The settings of the service's RPC for this run, read from `env` (throws on a bad one):
 * `url` (DEV_RPC_URL, or null), `proxy` (DEV_RPC_PROXY=1: its port and caps, or null), `history`
 * (DEV_CHAIN_HISTORY, the empty blocks a new chain starts with) and `limits` (DEV_RPC_MAX_LOG_RANGE and
 * DEV_RPC_MAX_BATCH, passed to the service as RPC_MAX_LOG_RANGE and RPC_MAX_BATCH when set).
 */
export function devRpcSettings(env) {
  if (!["1", "0", "", undefined].includes(env.DEV_RPC_PROXY)) throw new Error("DEV_RPC_PROXY is 1 or unset");
  const proxied = env.DEV_RPC_PROXY === "1";
  const url = env.DEV_RPC_URL || null;
  if (url && proxied) throw new Error("DEV_RPC_URL and DEV_RPC_PROXY=1 each choose the service's RPC: set one");
  if (url && !/^https?:\/\//.test(url)) throw new Error(`DEV_RPC_URL is an http(s) URL, not ${JSON.stringify(url)}`);
  const maxLogRange = whole(env, "DEV_RPC_MAX_LOG_RANGE", null);
  const maxBatch = whole(env, "DEV_RPC_MAX_BATCH", null);
  return {
    url,
    proxy: proxied
      ? {
          port: whole(env, "DEV_RPC_PROXY_PORT", 8746),
          maxLogRange: maxLogRange ?? DEFAULT_MAX_LOG_RANGE,
          maxBatch: maxBatch ?? DEFAULT_MAX_BATCH,
        }
      : null,
    history: whole(env, "DEV_CHAIN_HISTORY", proxied ? PROXY_HISTORY : 0),
    limits: {
      ...(maxLogRange !== null ? { RPC_MAX_LOG_RANGE: String(maxLogRange) } : {}),
      ...(maxBatch !== null ? { RPC_MAX_BATCH: String(maxBatch) } : {}),
    },
  };
}

/**
 * The service's RPC settings for a started `chain`: `{ vars, stop }`, where `vars` holds RPC_URL when it
 * is not the chain's own (and the caps, when given), and `stop()` ends the proxy this started, if any.
 */
export async function devRpc(settings, chain, log) {
  if (settings.url) {
    log(`the service reaches the chain through DEV_RPC_URL=${settings.url}`);
    return { vars: { RPC_URL: settings.url, ...settings.limits }, stop: async () => {} };
  }
  if (!settings.proxy) return { vars: { ...settings.limits }, stop: async () => {} };
  const { port, maxLogRange, maxBatch } = settings.proxy;
  const proxy = await startRpcProxy({ upstream: chain.rpcUrl, port, maxLogRange, maxBatch });
  log(
    `the service reaches the chain through a provider-like proxy at ${proxy.url} (eth_getLogs up to ${maxLogRange} ` +
      `blocks, batches up to ${maxBatch} calls; what it served: GET ${proxy.url}/stats)`,
  );
  return {
    vars: { RPC_URL: proxy.url, RPC_MAX_LOG_RANGE: String(maxLogRange), RPC_MAX_BATCH: String(maxBatch) },
    stop: () => proxy.close(),
  };
}
