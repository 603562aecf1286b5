// `npm run chain:proxy -- --upstream http://127.0.0.1:8545 --port 8746 --max-log-range 1000 --max-batch 100`:
// a JSON-RPC proxy in front of a chain that refuses what a hosted provider refuses (an `eth_getLogs` over the
// range cap, a batch over the batch cap, optionally an answer over the result cap), in the providers' error
// shapes, and counts what it serves (GET /stats). docs/operations.md#rpc-providers says which provider words
// its refusals how; scripts/lib/rpc-proxy.mjs is the proxy itself.
import { parseArgs } from "node:util";
import { DEFAULT_MAX_BATCH, DEFAULT_MAX_LOG_RANGE, RANGE_STYLES, startRpcProxy } from "./lib/rpc-proxy.mjs";

const usage = `usage: npm run chain:proxy -- [--upstream URL] [--host H] [--port N]
       [--max-log-range N] [--max-batch N] [--max-log-results N] [--style ${RANGE_STYLES.join("|")}]
  --upstream         the chain's JSON-RPC URL (default http://127.0.0.1:8545, npm run dev's chain)
  --port             where the proxy listens (default 8746; 0: any free port)
  --max-log-range    the most blocks one eth_getLogs may span, both ends counted (default ${DEFAULT_MAX_LOG_RANGE})
  --max-batch        the most calls one JSON-RPC batch may carry (default ${DEFAULT_MAX_BATCH})
  --max-log-results  the most logs one eth_getLogs may return (default 0: no cap; Infura's is 10000)
  --style            how an over-range eth_getLogs is refused (default quicknode)`;

let values;
try {
  ({ values } = parseArgs({
    options: {
      upstream: { type: "string", default: "http://127.0.0.1:8545" },
      host: { type: "string", default: "127.0.0.1" },
      port: { type: "string", default: "8746" },
      "max-log-range": { type: "string", default: String(DEFAULT_MAX_LOG_RANGE) },
      "max-batch": { type: "string", default: String(DEFAULT_MAX_BATCH) },
      "max-log-results": { type: "string", default: "0" },
      style: { type: "string", default: "quicknode" },
      help: { type: "boolean", default: false },
    },
  }));
} catch (error) {
  console.error(`${error.message}\n${usage}`);
  process.exit(2);
}
if (values.help) {
  console.log(usage);
  process.exit(0);
}
/** A whole number of at least `min`, or the usage and exit. */
const count = (name, min) => {
  const value = values[name];
  if (!/^\d+$/.test(value) || Number(value) < min) {
    console.error(`--${name} is a whole number of at least ${min}, not ${JSON.stringify(value)}\n${usage}`);
    process.exit(2);
  }
  return Number(value);
};
if (!RANGE_STYLES.includes(values.style)) {
  console.error(`--style is one of ${RANGE_STYLES.join(", ")}\n${usage}`);
  process.exit(2);
}

const proxy = await startRpcProxy({
  upstream: values.upstream,
  host: values.host,
  port: count("port", 0),
  maxLogRange: count("max-log-range", 1),
  maxBatch: count("max-batch", 1),
  maxLogResults: count("max-log-results", 0),
  style: values.style,
});
const { maxLogRange, maxBatch, maxLogResults, style } = proxy.limits;
console.log(
  `[rpc-proxy] ${proxy.url} -> ${values.upstream}: eth_getLogs up to ${maxLogRange} blocks (refused as ${style}), ` +
    `batches up to ${maxBatch} calls${maxLogResults ? `, up to ${maxLogResults} logs an answer` : ""}; GET ${proxy.url}/stats`,
);
const stop = async () => {
  await proxy.close();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
