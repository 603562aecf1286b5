import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, inject } from "vitest";
import type { ProviderLimitOptions, RpcProxyStats } from "../../scripts/lib/rpc-proxy.mjs";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** A port nothing listens on now, for a server of a test's own. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

export interface DevServer {
  url: string;
  port: number;
  /**
   * The process group of `npm run dev` and everything it started (wrangler, both workerd; anvil too
   * with DEV_CHAIN_PERSIST=false, else anvil runs in a session of its own).
   */
  pgid: number;
  rpcUrl: string;
  /**
   * With `rpcProxy` given: the provider-like proxy in front of the chain (`npm run chain:proxy`) that the
   * service reaches it through (DEV_RPC_URL); its `stats()` count what the service asked and what was refused.
   */
  proxy: ProxyProcess | null;
  /** Its DEV_PERSIST_DIR: the local database, Durable Objects and (in `chain/`) the chain's state. */
  stateDir: string;
  /** Runs SQL against the server's local D1 (as an operator with wrangler would): `DB`, or another binding such as `DB_SHARD_1`. */
  d1: (sql: string, binding?: string) => { status: number | null; stdout: string; stderr: string };
  log: () => string;
  cli: (...args: string[]) => { status: number | null; stdout: string; stderr: string };
  /** The CLI as `cli`, with `vars` over its environment (another DEV_PERSIST_DIR: no local chain recorded). */
  cliWith: (
    vars: Record<string, string>,
    ...args: string[]
  ) => { status: number | null; stdout: string; stderr: string };
  /** Kills its process group at once (SIGKILL: nothing gets to clean up); the state directory stays. */
  kill: () => Promise<void>;
  /**
   * `npm run dev` again on the same ports and state directory (after `kill()`), with `vars` over the
   * first start's. Rejects with its output when it exits before it is ready.
   */
  restart: (vars?: Record<string, string>) => Promise<DevServer>;
  /** Stops it (SIGTERM to the group), ends the chain kept for its state directory, and deletes that directory. */
  stop: () => Promise<void>;
}

/** A service answer: its status, its text, and that text as JSON (null when empty or not JSON). */
export interface ServiceAnswer {
  status: number;
  text: string;
  /** Whatever JSON the service answered: the tests read into it freely. */
  body: any;
}

/**
 * A request to the service at `base`, closing its connection (a pooled one the dev server closed
 * fails at once): a bearer credential when given, a JSON body when given.
 */
export async function callService(
  base: string,
  method: string,
  path: string,
  bearer: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<ServiceAnswer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      connection: "close",
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, text, body: parsed };
}

/**
 * Whether `text` is wrangler's dev proxy saying the Worker behind it reloaded while it held the request
 * (a 503 it answers itself, only for requests with a body; the service never saw or never finished it).
 * A rare event under a loaded machine that no file change explains; a caller whose request is safe to
 * repeat (an x402 settle of one signed authorization) sends it again.
 */
export const devProxyReloaded = (status: number, text: string) =>
  status === 503 && text.startsWith("Your worker restarted mid-request");

interface Place {
  port: number;
  anvilPort: number;
  stateDir: string;
  proxy: ProxyProcess | null;
}

/** `npm run chain:proxy`, running in a process of its own. */
export interface ProxyProcess {
  url: string;
  stats: () => Promise<RpcProxyStats>;
  stop: () => Promise<void>;
}

/**
 * Starts `npm run chain:proxy` in front of `upstream` on a free port. A process of its own, not this
 * one: the harness waits on the CLI and wrangler synchronously (`cli`, `d1`), and a proxy in this
 * process would answer nobody meanwhile, the CLI's own calls through it included.
 */
async function startProxyProcess(upstream: string, limits: ProviderLimitOptions): Promise<ProxyProcess> {
  const flags = [
    ...(limits.maxLogRange ? ["--max-log-range", String(limits.maxLogRange)] : []),
    ...(limits.maxBatch ? ["--max-batch", String(limits.maxBatch)] : []),
    ...(limits.maxLogResults ? ["--max-log-results", String(limits.maxLogResults)] : []),
    ...(limits.style ? ["--style", limits.style] : []),
  ];
  const child = spawn(
    process.execPath,
    [path.join(ROOT, "scripts/rpc-proxy.mjs"), "--upstream", upstream, "--port", "0", ...flags],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 30_000;
  const announced = () => /\[rpc-proxy\] (http:\/\/\S+) ->/.exec(output)?.[1];
  while (!announced()) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`npm run chain:proxy did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const proxyUrl = announced()!;
  // Ended with this process if the file ends without its `stop()`.
  const kill = () => child.kill("SIGTERM");
  process.once("exit", kill);
  return {
    url: proxyUrl,
    stats: async () => (await (await fetch(`${proxyUrl}/stats`)).json()) as RpcProxyStats,
    stop: async () => {
      process.off("exit", kill);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    },
  };
}

export interface DevServerOptions {
  /**
   * Start the service behind a proxy with a provider's limits (these caps over the defaults, 1,000 blocks
   * and 100 calls): `npm run dev` with DEV_RPC_URL pointing at it, the proxy in front of its local chain.
   */
  rpcProxy?: ProviderLimitOptions;
}

/**
 * `npm run dev` as a hosted provider serves its chain: behind the proxy (1,000-block log ranges, 100-call
 * batches, DEV_RPC_URL) on a chain with 3,000 empty blocks first. The chain-facing e2e files start their
 * server this way: `startDevServer({ ...BEHIND_A_PROVIDER.vars, ... }, BEHIND_A_PROVIDER.options)`.
 */
export const BEHIND_A_PROVIDER: { vars: Record<string, string>; options: DevServerOptions } = {
  vars: { DEV_CHAIN_HISTORY: "3000" },
  options: { rpcProxy: { maxLogRange: 1_000, maxBatch: 100 } },
};

/** A server started BEHIND_A_PROVIDER had nothing refused by its proxy: no log range, batch or answer over the caps. */
export async function expectNothingRefused(dev: DevServer) {
  const stats = await dev.proxy!.stats();
  expect(stats.refused, JSON.stringify(stats.refusals)).toEqual({ logRange: 0, batch: 0, logResults: 0 });
}

/**
 * Starts `npm run dev` (with its own local chain) on free ports with its own state directory, as a person would.
 * A free port can be taken between finding it and binding it (the e2e files and the workers pool start
 * servers at the same time): a start that dies before it is ready is tried again on new ports.
 */
export async function startDevServer(
  vars: Record<string, string> = {},
  options: DevServerOptions = {},
): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(vars, options);
    } catch (error) {
      if (!(error instanceof ExitedEarly) || attempt === 3) throw error;
    }
  }
}

class ExitedEarly extends Error {}

/** Whether `pid` runs (a zombie does not). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** The anvil npm run dev keeps for `stateDir` (its pid file), if it runs. */
export function keptAnvil(stateDir: string): number | null {
  try {
    const pid = Number(readFileSync(path.join(stateDir, "chain", "anvil.pid"), "utf8"));
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return running(pid) && cmdline.includes(stateDir) ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Ends the anvil kept for `stateDir`, if one runs: npm run dev stops it as it stops itself, so it is
 * given `graceMs` to go (dumping its state) before it is sent SIGTERM, and SIGKILL 30 s later.
 */
async function endKeptAnvil(stateDir: string, graceMs: number) {
  const pid = keptAnvil(stateDir);
  if (pid === null) return;
  const termAt = Date.now() + graceMs;
  const killAt = termAt + 30_000;
  let termed = false;
  while (running(pid)) {
    if (!termed && Date.now() > termAt) {
      process.kill(pid, "SIGTERM");
      termed = true;
    }
    if (Date.now() > killAt) process.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A new state directory holding the local databases with every migration applied, copied from the
 * run's template (test/setup/dev-template.global.ts): the server's own migration step finds nothing
 * left to do, where applying them all took most of its start.
 */
async function migratedStateDir(): Promise<string> {
  const template = inject("devTemplate");
  const deadline = Date.now() + 300_000;
  while (!existsSync(path.join(template, "ready"))) {
    if (existsSync(path.join(template, "failed")))
      throw new Error(`the migrations could not be applied:\n${readFileSync(path.join(template, "failed"), "utf8")}`);
    if (Date.now() > deadline) throw new Error("the migrated databases were not made within 300 s");
    await new Promise((r) => setTimeout(r, 200));
  }
  const stateDir = mkdtempSync(path.join(tmpdir(), "agent-pay-e2e-"));
  cpSync(path.join(template, "state"), stateDir, { recursive: true });
  return stateDir;
}

async function startOnce(vars: Record<string, string>, options: DevServerOptions, place?: Place): Promise<DevServer> {
  const port = place?.port ?? (await freePort());
  const anvilPort = place?.anvilPort ?? (await freePort());
  const stateDir = place?.stateDir ?? (await migratedStateDir());
  // The proxy forwards to the chain's port before the chain answers there: npm run dev starts it.
  const proxy =
    place?.proxy ??
    (options.rpcProxy ? await startProxyProcess(`http://127.0.0.1:${anvilPort}`, options.rpcProxy) : null);
  const env = {
    ...process.env,
    PORT: String(port),
    ANVIL_PORT: String(anvilPort),
    DEV_PERSIST_DIR: stateDir,
    DEV_CRON_SECONDS: "2",
    ...(proxy ? { DEV_RPC_URL: proxy.url } : {}),
    ...vars,
  };
  const child: ChildProcess = spawn("npm", ["run", "--silent", "dev"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  /** Until it exits, with a code or by a signal. */
  const up = () => child.exitCode === null && child.signalCode === null;
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  // Ready means this server said so and its own 404 answers: another process that holds the port
  // (a chain, another test's server) must not pass for it.
  for (;;) {
    if (!up()) {
      if (!place) {
        await endKeptAnvil(stateDir, 5_000);
        rmSync(stateDir, { recursive: true, force: true });
        await proxy?.stop();
      }
      throw new ExitedEarly(`npm run dev exited early with ${child.exitCode ?? child.signalCode}:\n${output}`);
    }
    if (output.includes(`[dev] ready on ${url}`)) {
      try {
        // Each probe gives up after a while: one the server took and never answered (its proxy while
        // the Worker restarts) would otherwise hold the loop past the deadline, to the hook's timeout.
        const res = await fetch(`${url}/no-such-route`, { signal: AbortSignal.timeout(5_000) });
        if (res.status === 404 && ((await res.json()) as { error?: string }).error === "not_found") break;
      } catch {
        // not listening yet, or no answer in time: probe again
      }
    }
    if (Date.now() > deadline) throw new Error(`npm run dev did not answer within 90 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 300));
  }
  const server: DevServer = {
    url,
    port,
    pgid: child.pid!,
    rpcUrl: `http://127.0.0.1:${anvilPort}`,
    proxy,
    stateDir,
    d1: (sql, binding = "DB") => {
      // A second process on the running server's local database: under a loaded machine it failed
      // once in a full run (the server writing at that moment, most likely), so it gets three tries;
      // the last failure's output is returned for the caller's assertion.
      let result!: ReturnType<typeof spawnSync>;
      for (let attempt = 0; attempt < 3; attempt++) {
        if (attempt > 0) spawnSync("sleep", ["1"]);
        result = spawnSync(
          path.join(ROOT, "node_modules/.bin/wrangler"),
          ["d1", "execute", binding, "--local", "--persist-to", stateDir, "--command", sql],
          {
            cwd: ROOT,
            env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
            encoding: "utf8",
          },
        );
        if (result.status === 0) break;
      }
      return { status: result.status, stdout: String(result.stdout), stderr: String(result.stderr) };
    },
    log: () => output,
    cli: (...args) => server.cliWith({}, ...args),
    cliWith: (vars, ...args) => {
      const result = spawnSync("npm", ["run", "--silent", "cli", "--", ...args], {
        cwd: ROOT,
        // The state directory too: the CLI finds this server's local chain (and its audit anchor) recorded there.
        env: { ...process.env, SERVICE_URL: url, DEV_PERSIST_DIR: stateDir, ...vars },
        encoding: "utf8",
      });
      return { status: result.status, stdout: result.stdout, stderr: result.stderr };
    },
    kill: async () => {
      if (up() && child.pid) {
        process.kill(-child.pid, "SIGKILL");
        await new Promise((r) => child.once("exit", r));
      }
    },
    restart: (more = {}) => startOnce({ ...vars, ...more }, options, { port, anvilPort, stateDir, proxy }),
    stop: async () => {
      const stopping = up() && child.pid;
      if (stopping) {
        process.kill(-child.pid!, "SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
      await endKeptAnvil(stateDir, stopping ? 10_000 : 0);
      rmSync(stateDir, { recursive: true, force: true });
      await proxy?.stop();
    },
  };
  return server;
}

/** A local receiver of a merchant's webhook events, and its URL; `close` stops it. */
export async function eventReceiver() {
  const events: { type: string; data: Record<string, unknown> }[] = [];
  const server = createHttpServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      events.push(JSON.parse(raw));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { events, url: `http://127.0.0.1:${port}/hook`, close: () => server.close() };
}
