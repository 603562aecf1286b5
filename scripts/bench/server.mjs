// Starts `npm run dev` (scripts/dev.mjs: local D1 migrated, Durable Objects, Queues and the local
// chain, all on workerd) for the benchmark: on free ports, with its own throw-away state
// directory, and running the bench's Worker (bench/worker.ts: the service plus the runtime-floor
// routes). A developer's own `npm run dev` is never touched. `stop()` ends the whole process group
// it started. `vars` adds settings to its environment (the shards group's instance runs with
// DEV_LEDGER_SHARDS=2: scripts/dev.mjs); without them it is the default bench's service.
import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BENCH_CONFIG, checkBenchConfig } from "./config.mjs";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** A port nothing listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no free port")),
      );
    });
  });
}

/**
 * @param {{ log: (line: string) => void, vars?: Record<string, string> }} options
 * @returns {Promise<{ url: string, rpcUrl: string, output: () => string, reloads: () => number, stop: () => Promise<void> }>}
 */
export async function startService({ log, vars = {} }) {
  checkBenchConfig();
  const port = await freePort();
  const anvilPort = await freePort();
  const stateDir = mkdtempSync(path.join(tmpdir(), "agent-pay-bench-"));
  // The shard settings come from `vars` only: a DEV_LEDGER_SHARDS left in the shell must not move the default bench.
  const { DEV_LEDGER_SHARDS: _shards, DEV_LEDGER_SHARD_PLACEMENT: _placement, ...inherited } = process.env;
  const env = {
    ...inherited,
    PORT: String(port),
    ANVIL_PORT: String(anvilPort),
    DEV_PERSIST_DIR: stateDir,
    DEV_CONFIG: BENCH_CONFIG,
    // The cron at production's cadence (once a minute), not `npm run dev`'s every 10 s: six times the
    // background jobs (checkpoints, treasury checks, sweeps) would land in the measured windows.
    DEV_CRON_SECONDS: process.env.DEV_CRON_SECONDS ?? "60",
    // anvil in the process group, as the meter finds it (scripts/bench/threads.mjs) and stop() ends it,
    // and no saves of its state in the measured windows: the bench's chain is thrown away anyway.
    DEV_CHAIN_PERSIST: "false",
    ...vars,
  };
  // Its own process group (detached), so stop() reaches wrangler, workerd and anvil too.
  const child = spawn(process.execPath, [path.join(ROOT, "scripts/dev.mjs")], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  const collect = (chunk) => {
    if (process.env.BENCH_SERVICE_LOG) appendFileSync(process.env.BENCH_SERVICE_LOG, chunk);
    output += chunk.toString();
    // Keep the tail only: the log is for error reports and for spotting reloads.
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  let reloads = 0;
  child.stdout.on("data", (chunk) => {
    // wrangler dev rebuilds when a source file changes; a reload mid-scenario spoils its numbers.
    if (/Reloading local server/.test(chunk.toString())) reloads++;
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (child.exitCode === null && child.signalCode === null && child.pid) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      const late = setTimeout(() => {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }, 5000);
      await exited;
      clearTimeout(late);
    }
    rmSync(stateDir, { recursive: true, force: true });
  };

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  log(`starting the service (npm run dev) at ${url}, local chain at 127.0.0.1:${anvilPort}`);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`npm run dev exited early:\n${output.slice(-4000)}`);
    }
    try {
      const res = await fetch(`${url}/__bench/noop`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`npm run dev did not answer within 120 s:\n${output.slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    url,
    port,
    pgid: child.pid,
    rpcUrl: `http://127.0.0.1:${anvilPort}`,
    stateDir,
    output: () => output,
    reloads: () => reloads,
    stop,
  };
}
