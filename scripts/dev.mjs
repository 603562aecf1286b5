// `npm run dev`: the whole service at http://127.0.0.1:8787 on local workerd,
// with the D1 migrations applied, local secrets in place, and the local chain
// of docs/operations.md#local (anvil on 127.0.0.1:8545, chain id 84532, the test
// stablecoin). No account or network is needed. PORT, ANVIL_PORT and
// DEV_PERSIST_DIR move it aside (tests run their own instance); DEV_CONFIG runs
// another Worker configuration (`npm run bench`'s, bench/wrangler.toml).
// DEV_LEDGER_SHARDS and DEV_LEDGER_SHARD_PLACEMENT set LEDGER_SHARDS and
// LEDGER_SHARD_PLACEMENT for this run only (as bindings over the configuration's
// vars, which stay as they are): `npm run bench`'s shards group runs its own
// instance with two ledger shards this way. The chain's state is kept in the state directory's `chain/`
// and anvil runs apart from this process group (scripts/lib/chain-state.mjs); DEV_CHAIN_PERSIST=false
// runs it as part of the group with nothing kept, a new chain every start (`npm run bench`).
// DEV_RPC_URL points the service at another JSON-RPC URL in front of the chain (a proxy holding it to a
// provider's limits); DEV_RPC_PROXY=1 starts such a proxy here; DEV_CHAIN_HISTORY gives a new chain that
// many empty blocks first (scripts/lib/dev-rpc.mjs, docs/operations.md#local).
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";
import { auditAnchorVars, settlementBatchVars, startLocalChain, x402Vars } from "./lib/chain.mjs";
import { chainCheck, startingOver } from "./lib/chain-check.mjs";
import { ChainStateError } from "./lib/chain-state.mjs";
import { bookDevFundings } from "./lib/dev-funding.mjs";
import { devRpc, devRpcSettings } from "./lib/dev-rpc.mjs";
import { ensureDevVars } from "./lib/dev-vars.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const wrangler = fileURLToPath(new URL("../node_modules/.bin/wrangler", import.meta.url));
// No metrics, no interactive prompts; the wrangler below runs in this process and reads these too.
// No fetch of Request.cf's data from workers.cloudflare.com either (each start did one, which fails
// offline with a warning): requests get miniflare's placeholder, which is what an offline start had.
Object.assign(process.env, {
  WRANGLER_SEND_METRICS: "false",
  CI: process.env.CI ?? "true",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
});
const env = process.env;
const port = process.env.PORT ?? "8787";
// Tests run their own instance beside a developer's, with separate state.
const persist = process.env.DEV_PERSIST_DIR ? ["--persist-to", process.env.DEV_PERSIST_DIR] : [];
const config = process.env.DEV_CONFIG ?? fileURLToPath(new URL("../wrangler.toml", import.meta.url));
// wrangler reads .dev.vars beside the configuration; another one still uses the local secrets here.
const envFiles = process.env.DEV_CONFIG ? [fileURLToPath(new URL("../.dev.vars", import.meta.url))] : undefined;

const step = (message) => console.log(`[dev] ${message}`);

/** Whether nothing listens on 127.0.0.1:`wanted` now. */
const portFree = (wanted) =>
  new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(wanted, "127.0.0.1", () => probe.close(() => resolve(true)));
  });

let rpcSettings;
try {
  rpcSettings = devRpcSettings(env);
} catch (error) {
  console.error(`[dev] ${error.message}`);
  process.exit(1);
}

// Another `npm run dev` on these ports is refused before anything is touched: taking over its kept
// chain, or migrating the databases it has open, would pull them from under it.
const ports = [["PORT", Number(port)], ...(rpcSettings.proxy ? [["DEV_RPC_PROXY_PORT", rpcSettings.proxy.port]] : [])];
for (const [name, wanted] of ports) {
  if (!(await portFree(wanted))) {
    console.error(`[dev] ${name} ${wanted} is in use (another npm run dev?): stop it first, or choose another port`);
    process.exit(1);
  }
}

ensureDevVars();
// Every ledger shard's database runs the same migrations (DB is shard 0).
for (const binding of ["DB", "DB_SHARD_1"]) {
  step(`applying D1 migrations to the local database ${binding}`);
  const migrate = spawnSync(
    wrangler,
    ["d1", "migrations", "apply", binding, "--local", "--config", config, ...persist],
    {
      cwd: root,
      env,
      stdio: "inherit",
    },
  );
  if (migrate.status !== 0) {
    console.error(`[dev] migrations of ${binding} failed`);
    process.exit(migrate.status ?? 1);
  }
}

// The token a chain that is already running got from an earlier start is remembered beside the service's state.
const stateDir = process.env.DEV_PERSIST_DIR ?? path.join(root, ".wrangler", "state");
mkdirSync(stateDir, { recursive: true });
if (!["true", "false", undefined].includes(env.DEV_CHAIN_PERSIST)) {
  console.error("[dev] DEV_CHAIN_PERSIST is true or false");
  process.exit(1);
}
// The chain kept beside the service's state (its saves, anvil's pid and log), unless DEV_CHAIN_PERSIST=false.
const chainDir = env.DEV_CHAIN_PERSIST === "false" ? null : path.join(stateDir, "chain");
const shown = (dir) => (path.relative(root, dir).startsWith("..") ? dir : path.relative(root, dir));
let chain;
try {
  chain = await startLocalChain({
    port: Number(process.env.ANVIL_PORT ?? 8545),
    log: step,
    rememberIn: path.join(stateDir, "local-chain.json"),
    keepIn: chainDir,
    history: rpcSettings.history,
    // Every ledger shard's database is read: DEV_LEDGER_SHARDS=2 records in DB_SHARD_1 too.
    check: chainCheck({
      wrangler,
      args: ["--config", config, ...persist],
      cwd: root,
      env,
      chainDir: shown(chainDir ?? stateDir),
      log: step,
    }),
  });
} catch (error) {
  if (!(error instanceof ChainStateError)) throw error;
  for (const line of `${error.message}\n${startingOver(shown(stateDir))}`.split("\n")) console.error(`[dev] ${line}`);
  process.exit(1);
}
// Whatever ends this process from here on ends the chain it started or took over too (a kept anvil
// dumps its state as it exits); only a kill of the whole group (SIGKILL) leaves a kept one running.
process.on("exit", () => chain.kill());
// The service's RPC: the chain itself, DEV_RPC_URL, or a proxy started here (DEV_RPC_PROXY=1).
const rpc = await devRpc(rpcSettings, chain, step);
// The chain's settings (token address, RPC, the facilitator's gas keys: public accounts of anvil's mnemonic) are local-only.
const chainVars = {
  ...x402Vars(chain),
  ...auditAnchorVars(chain),
  ...settlementBatchVars(chain),
  ...rpc.vars,
  DEPOSIT_CONFIRMATIONS: "1",
  // 1 settles one transaction per payment, as without the batch contract (for comparing the two).
  ...(env.X402_SETTLEMENT_BATCH_MAX ? { X402_SETTLEMENT_BATCH_MAX: env.X402_SETTLEMENT_BATCH_MAX } : {}),
};
// The ledger's shard count and placement, over wrangler.toml's (the service validates them as it would those).
const shardVars = {
  ...(env.DEV_LEDGER_SHARDS ? { LEDGER_SHARDS: env.DEV_LEDGER_SHARDS } : {}),
  ...(env.DEV_LEDGER_SHARD_PLACEMENT ? { LEDGER_SHARD_PLACEMENT: env.DEV_LEDGER_SHARD_PLACEMENT } : {}),
};

/**
 * The mode `wrangler dev` derives from the compatibility date and flags, by the same function of
 * the miniflare wrangler itself loads (so no_nodejs_compat_v2, nodejs_als and the default-on date
 * come out as they do there).
 */
const { getNodeCompat } = createRequire(createRequire(import.meta.url).resolve("wrangler"))("miniflare");
const nodeCompatModeOf = (config) => getNodeCompat(config.compatibility_date, config.compatibility_flags ?? []).mode;

step(
  `starting the service at http://127.0.0.1:${port}${shardVars.LEDGER_SHARDS ? ` with ${shardVars.LEDGER_SHARDS} ledger shards` : ""}`,
);
// wrangler's own dev server, started through its API rather than `wrangler dev` for one reason:
// the CLI always attaches its inspector proxy, which forwards every Network event of the Worker
// (each D1 query and each fetch is one) to the wrangler process as a debug log line, several per
// request; under load that costs more CPU than the Worker itself and is nothing production does.
// DEV_INSPECTOR=<port> attaches it there (Chrome DevTools, breakpoints). Everything else is `wrangler dev
// --local`: the same workerd, bindings, .dev.vars, state directory, file watching and reloads.
const worker = await unstable_startWorker({
  config,
  envFiles,
  bindings: Object.fromEntries(
    Object.entries({ ...chainVars, ...shardVars }).map(([name, value]) => [name, { type: "plain_text", value }]),
  ),
  // `wrangler dev` tells its bundler the Node.js compatibility mode from wrangler.toml's flags; the
  // API leaves it unset, and the bundle then treats node: imports as missing (the runtime has them).
  build: { nodejsCompatMode: nodeCompatModeOf },
  dev: {
    remote: false,
    server: { hostname: "127.0.0.1", port: Number(port) },
    inspector: process.env.DEV_INSPECTOR ? { hostname: "127.0.0.1", port: Number(process.env.DEV_INSPECTOR) } : false,
    persist: process.env.DEV_PERSIST_DIR ?? undefined,
    testScheduled: true,
    watch: true,
  },
});
await worker.ready;
// The settlement address's float is the operator's on purpose: booked, the treasury reads balanced.
// Before "ready", so whoever waits for it finds the booking (and its audit row, seq 1 on a fresh start) done.
await bookDevFundings({ base: `http://127.0.0.1:${port}`, transactions: chain.fundingTransactions, log: step });
step(`ready on http://127.0.0.1:${port}`);

// Local workerd does not fire cron triggers by itself; fire the scheduled
// handler on a short period (DEV_CRON_SECONDS, default 10) so deposits and
// retries show up quickly; production runs it every minute. `/__scheduled`
// (from --test-scheduled) reaches the Worker itself; /cdn-cgi/handler/scheduled
// stops at the static-assets router (the API reference's bundle) and fails.
const base = `http://127.0.0.1:${port}`;
const cron = setInterval(
  () => {
    fetch(`${base}/__scheduled`).catch(() => undefined);
  },
  Number(process.env.DEV_CRON_SECONDS ?? 10) * 1000,
);
cron.unref();

// Stop the server and the chain this script started, whatever ends it (wrangler's own signal
// handlers may exit the process first: the exit handler still ends the chain).
let stopping = null;
const stop = () =>
  (stopping ??= (async () => {
    await Promise.allSettled([worker.dispose(), chain.stop(), rpc.stop()]);
    process.exit(0);
  })());
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
