// A JSON-RPC proxy that holds a local chain to a hosted provider's limits (docs/operations.md#rpc-providers):
// it forwards every call unchanged, but refuses an `eth_getLogs` whose block span is over the range cap and
// a batch with more calls than the batch cap, in the providers' own error shapes, and counts what it serves.
// anvil enforces neither, so without it a log search no provider answers passes every local test.
// Used by `npm run chain:proxy` (scripts/rpc-proxy.mjs), `npm run dev` (DEV_RPC_PROXY), the e2e files and
// the workers tests' relay (test/setup/chain.global.ts), which all apply the same `providerLimits`.
import { createServer } from "node:http";

/** The caps `RPC_MAX_LOG_RANGE` and `RPC_MAX_BATCH` default to: a provider's that the service must live within. */
export const DEFAULT_MAX_LOG_RANGE = 1000;
export const DEFAULT_MAX_BATCH = 100;

/**
 * How an over-range `eth_getLogs` is refused, as each provider words it (each recorded from a real answer):
 * - `quicknode`: code -32614 "eth_getLogs is limited to a 1,000 range", HTTP 200; Base's public endpoint
 *   (mainnet.base.org) answers the same way with its own cap;
 * - `alchemy`: code -32600 "You can make eth_getLogs requests with up to a 1000 block range. Based on your
 *   parameters, this block range should work: [0x…, 0x…]", HTTP 400 for a lone call (its free plan's wording,
 *   with this proxy's cap in place of its 10).
 */
export const RANGE_STYLES = ["quicknode", "alchemy"];

const hex = (n) => `0x${n.toString(16)}`;
const TAGS_AT_HEAD = new Set(["latest", "pending", "safe", "finalized"]);

/** A block tag or number of a log filter as a number; `head()` resolves the tags providers read as the head. */
async function blockOf(tag, head) {
  if (tag === undefined || tag === null || TAGS_AT_HEAD.has(tag)) return head();
  if (tag === "earliest") return 0n;
  if (typeof tag === "string" && /^0x[0-9a-f]+$/i.test(tag)) return BigInt(tag);
  if (typeof tag === "number" && Number.isSafeInteger(tag)) return BigInt(tag);
  return null; // not a block: the node answers it as it would
}

/**
 * The blocks an `eth_getLogs` filter spans, both ends counted, as providers count them: a missing
 * `fromBlock` or `toBlock` is the head ("latest"), `earliest` is block 0. A filter by `blockHash` spans one
 * block. Null when the filter is not one a node would accept (it is forwarded, for the node to refuse).
 */
export async function logSpan(filter, head) {
  if (!filter || typeof filter !== "object") return null;
  if (filter.blockHash !== undefined) return { from: null, to: null, blocks: 1n };
  const from = await blockOf(filter.fromBlock, head);
  const to = await blockOf(filter.toBlock, head);
  if (from === null || to === null) return null;
  return { from, to, blocks: to >= from ? to - from + 1n : 0n };
}

const withThousands = (n) => n.toLocaleString("en-US");

/** The JSON-RPC error a provider answers an over-range `eth_getLogs` with, in `style`. */
export function rangeError(style, maxLogRange, from) {
  if (style === "alchemy")
    return {
      code: -32600,
      message:
        `You can make eth_getLogs requests with up to a ${maxLogRange} block range. Based on your parameters, ` +
        `this block range should work: [${hex(from)}, ${hex(from + BigInt(maxLogRange) - 1n)}]`,
    };
  return { code: -32614, message: `eth_getLogs is limited to a ${withThousands(maxLogRange)} range` };
}

/** What a node running geth's RPC server (op-geth, as Base's nodes) answers a batch over its item limit with. */
export const batchTooLarge = { code: -32600, message: "batch too large" };

/** Infura's answer to an `eth_getLogs` that matches more logs than it returns. */
export const tooManyResults = (limit, from, to) => ({
  code: -32005,
  data: { from: hex(from), limit, to: hex(to) },
  message: `query returned more than ${limit} results. Try with this block range [${hex(from)}, ${hex(to)}].`,
});

/** Counts of what was asked and served, for GET /stats (and a test's assertions). */
function freshStats() {
  return {
    /** HTTP requests, and the JSON-RPC calls in them. */
    requests: 0,
    calls: 0,
    /** Calls by method, refused ones included. */
    byMethod: {},
    /** Requests that were a batch, and the most calls one carried. */
    batches: 0,
    largestBatch: 0,
    /** The widest `eth_getLogs` span forwarded to the node, and the widest asked for (refused ones too). */
    largestLogRange: 0,
    largestLogRangeAsked: 0,
    /** Refusals by kind: over the range cap, over the batch cap, over the result cap. */
    refused: { logRange: 0, batch: 0, logResults: 0 },
    /** What would have been refused had the caps been enforced (only counted when they are not). */
    overCaps: { logRange: 0, batch: 0 },
    /** The latest refusals, oldest first (at most 50): what, why, and the span or size. */
    refusals: [],
  };
}

/**
 * The provider's limits applied to JSON-RPC traffic. `handle(body, forward)` answers one HTTP request:
 * `forward(text)` sends a body to the node (`{ status, text }`); only the calls within the caps reach it.
 * With `enforce: false` nothing is refused, and what the caps would have refused is counted in `overCaps`.
 */
export function providerLimits({
  maxLogRange = DEFAULT_MAX_LOG_RANGE,
  maxBatch = DEFAULT_MAX_BATCH,
  maxLogResults = 0,
  style = "quicknode",
  enforce = true,
} = {}) {
  if (!RANGE_STYLES.includes(style)) throw new Error(`style is one of ${RANGE_STYLES.join(", ")}, not ${style}`);
  let stats = freshStats();
  const refuse = (kind, detail) => {
    stats.refused[kind]++;
    stats.refusals.push({ kind, ...detail });
    if (stats.refusals.length > 50) stats.refusals.shift();
  };

  /** The head, read from the node once per request that needs it. */
  const headReader = (forward) => {
    let head = null;
    return () =>
      (head ??= forward(JSON.stringify({ jsonrpc: "2.0", id: "rpc-proxy-head", method: "eth_blockNumber" })).then(
        ({ text }) => BigInt(JSON.parse(text).result),
      ));
  };

  /** The error a call gets instead of the node's answer, or null to forward it. Counts it either way. */
  const admit = async (call, head) => {
    const method = typeof call?.method === "string" ? call.method : "(none)";
    stats.calls++;
    stats.byMethod[method] = (stats.byMethod[method] ?? 0) + 1;
    if (method !== "eth_getLogs") return null;
    const span = await logSpan(call.params?.[0], head);
    if (!span) return null;
    const blocks = Number(span.blocks);
    stats.largestLogRangeAsked = Math.max(stats.largestLogRangeAsked, blocks);
    if (blocks > maxLogRange) {
      if (!enforce) stats.overCaps.logRange++;
      else {
        refuse("logRange", { method, blocks, fromBlock: hex(span.from), toBlock: hex(span.to) });
        return rangeError(style, maxLogRange, span.from);
      }
    }
    stats.largestLogRange = Math.max(stats.largestLogRange, blocks);
    call.span = span;
    return null;
  };

  /** A forwarded `eth_getLogs` answer with more logs than the result cap becomes Infura's refusal. */
  const capResults = (call, answer) => {
    if (!maxLogResults || call?.method !== "eth_getLogs" || !Array.isArray(answer?.result)) return answer;
    if (answer.result.length <= maxLogResults || call.span?.from == null) return answer;
    refuse("logResults", { method: call.method, results: answer.result.length });
    const { from, to } = call.span;
    return { jsonrpc: "2.0", id: answer.id, error: tooManyResults(maxLogResults, from, to) };
  };

  const json = (status, value) => ({ status, text: JSON.stringify(value) });

  async function handle(body, forward) {
    stats.requests++;
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch {
      return forward(body); // not JSON: the node answers it as it would
    }
    const head = headReader(forward);
    if (!Array.isArray(parsed)) {
      const error = await admit(parsed, head);
      if (error) return json(style === "alchemy" ? 400 : 200, { jsonrpc: "2.0", id: parsed?.id ?? null, error });
      const answer = await forward(body);
      if (!maxLogResults || answer.status !== 200) return answer;
      return json(200, capResults(parsed, JSON.parse(answer.text)));
    }
    stats.batches++;
    stats.largestBatch = Math.max(stats.largestBatch, parsed.length);
    if (parsed.length > maxBatch) {
      if (!enforce) stats.overCaps.batch++;
      else {
        for (const call of parsed) {
          stats.calls++;
          const method = typeof call?.method === "string" ? call.method : "(none)";
          stats.byMethod[method] = (stats.byMethod[method] ?? 0) + 1;
        }
        refuse("batch", { size: parsed.length });
        // geth answers for the whole batch with one error, under the first call's id.
        return json(200, [
          { jsonrpc: "2.0", id: parsed.find((c) => c?.id !== undefined)?.id ?? null, error: batchTooLarge },
        ]);
      }
    }
    const errors = [];
    for (const call of parsed) errors.push(await admit(call, head));
    const passing = parsed.filter((_, i) => !errors[i]);
    const anyRefused = errors.some(Boolean);
    if (passing.length === 0)
      return json(
        200,
        parsed.map((call, i) => ({ jsonrpc: "2.0", id: call?.id ?? null, error: errors[i] })),
      );
    const forwarded = passing.map(({ span: _span, ...call }) => call);
    const answer = await forward(anyRefused ? JSON.stringify(forwarded) : body);
    if (answer.status !== 200 || (!anyRefused && !maxLogResults)) return answer;
    const answers = JSON.parse(answer.text);
    if (!Array.isArray(answers)) return answer;
    // The answers in the order of the calls, the refused ones in their places.
    const idOf = (x) => JSON.stringify(x?.id ?? null);
    const byId = new Map(answers.map((a) => [idOf(a), a]));
    return json(
      200,
      parsed.map((call, i) =>
        errors[i] ? { jsonrpc: "2.0", id: call?.id ?? null, error: errors[i] } : capResults(call, byId.get(idOf(call))),
      ),
    );
  }

  return {
    handle,
    stats: () => structuredClone(stats),
    reset: () => {
      stats = freshStats();
    },
    limits: { maxLogRange, maxBatch, maxLogResults, style, enforce },
  };
}

/** `forward` for `handle`: POSTs the body to `upstream` (an HTTP JSON-RPC endpoint). */
export const forwardTo = (upstream) => async (text) => {
  const answer = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body: text });
  return { status: answer.status, text: await answer.text() };
};

const readBody = (req) =>
  new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });

/**
 * Starts the proxy on `host:port` (0: a free port) in front of `upstream`. GET /stats answers the
 * counts (see `freshStats`), POST /stats/reset zeroes them; every other POST is JSON-RPC.
 * Resolves to `{ url, port, stats(), reset(), close() }`.
 */
export async function startRpcProxy({ upstream, host = "127.0.0.1", port = 0, ...limits }) {
  if (!upstream) throw new Error("the proxy needs an upstream RPC URL");
  const limiter = providerLimits(limits);
  const forward = forwardTo(upstream);
  const server = createServer(async (req, res) => {
    try {
      if (req.method === "GET" && req.url === "/stats") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(limiter.stats()));
        return;
      }
      if (req.method === "POST" && req.url === "/stats/reset") {
        limiter.reset();
        res.writeHead(204).end();
        return;
      }
      if (req.method !== "POST") {
        res.writeHead(405).end();
        return;
      }
      const answer = await limiter.handle(await readBody(req), forward);
      res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.text);
    } catch (error) {
      // The node could not be reached (stopped, not started yet): a gateway's answer.
      res.writeHead(502, { "content-type": "text/plain" }).end(String(error));
    }
  });
  // Idle connections stay open, as a provider's do: Node's default closes them after 5 s, and a client
  // reusing one just then would see a reset where the chain never failed.
  server.keepAliveTimeout = 0;
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  const bound = server.address().port;
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    limits: limiter.limits,
    stats: limiter.stats,
    reset: limiter.reset,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
