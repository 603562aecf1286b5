// `npm run dev`: the whole service at http://127.0.0.1:8787 on local workerd,
// with the D1 migrations applied, local secrets in place, and the local chain
// of operations §7 (anvil on 127.0.0.1:8545, chain id 84532, the test
// stablecoin). No account or network is needed. PORT, ANVIL_PORT and
// DEV_PERSIST_DIR move it aside (tests run their own instance).
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { startLocalChain, x402Vars } from "./lib/chain.mjs";
import { ensureDevVars } from "./lib/dev-vars.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const wrangler = fileURLToPath(new URL("../node_modules/.bin/wrangler", import.meta.url));
const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: process.env.CI ?? "true" };
const port = process.env.PORT ?? "8787";
// Tests run their own instance beside a developer's, with separate state.
const persist = process.env.DEV_PERSIST_DIR ? ["--persist-to", process.env.DEV_PERSIST_DIR] : [];

const step = (message) => console.log(`[dev] ${message}`);

ensureDevVars();
step("applying D1 migrations to the local database");
const migrate = spawnSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", ...persist], { cwd: root, env, stdio: "inherit" });
if (migrate.status !== 0) {
  console.error("[dev] migrations failed");
  process.exit(migrate.status ?? 1);
}

const chain = await startLocalChain({ port: Number(process.env.ANVIL_PORT ?? 8545), log: step });
// The chain's settings (token address, RPC, the facilitator's gas key: anvil's public account 0) are local-only.
const chainVars = { ...x402Vars(chain), DEPOSIT_CONFIRMATIONS: "1" };
// `npm run bench` (scripts/bench) asks for its runtime-floor routes; nothing else sets this.
if (process.env.BENCH_ROUTES === "true") chainVars.BENCH_ROUTES = "true";
const varFlags = Object.entries(chainVars).flatMap(([key, value]) => ["--var", `${key}:${value}`]);

step(`starting the service at http://127.0.0.1:${port}`);
const server = spawn(wrangler, ["dev", "--local", "--ip", "127.0.0.1", "--port", port, "--show-interactive-dev-session=false", "--test-scheduled", ...persist, ...varFlags], {
  cwd: root,
  env,
  stdio: "inherit",
});

// Local workerd does not fire cron triggers by itself; fire the scheduled
// handler on a short period (DEV_CRON_SECONDS, default 10) so deposits and
// retries show up quickly; production runs it every minute. `/__scheduled`
// (from --test-scheduled) reaches the Worker itself; /cdn-cgi/handler/scheduled
// stops at the static-assets router (the API reference's bundle) and fails.
const base = `http://127.0.0.1:${port}`;
const cron = setInterval(() => {
  fetch(`${base}/__scheduled`).catch(() => undefined);
}, Number(process.env.DEV_CRON_SECONDS ?? 10) * 1000);
cron.unref();

const stop = (signal) => {
  if (!server.killed) server.kill(signal);
};
process.on("SIGINT", () => stop("SIGINT"));
process.on("SIGTERM", () => stop("SIGTERM"));
// Stop the chain this script started, whatever ended the server.
server.on("exit", async (code, signal) => {
  await chain.stop();
  process.exit(code ?? (signal ? 0 : 1));
});
