import { createServer, type Server } from "node:http";
import { createWalletClient, type Hex, http, keccak256, nonceManager, parseTransaction } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { TestProject } from "vitest/node";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { startLocalChain, x402Vars } from "../../scripts/lib/chain.mjs";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { compileAuditAnchor } from "../../scripts/lib/contracts.mjs";
import { forwardTo, type ProviderLimits, providerLimits } from "../../scripts/lib/rpc-proxy.mjs";
import { transferCallData } from "../../src/x402/transfer";

/**
 * A real local EVM chain for the x402 tests (anvil, chain id 84532, the
 * EIP-3009 test stablecoin), and a stand-in for a remote facilitator:
 * `POST /hang/settle` broadcasts the transfer on the real chain and then never
 * answers, as a facilitator that times out after broadcasting does.
 *
 * The Worker reaches the chain through a relay that forwards every JSON-RPC
 * request unchanged and records each `eth_sendRawTransaction` (GET /sends), so
 * a test can see in which order, and when, the service hands transactions to
 * the node. POST /refuse (a `Refusal`) makes it answer some requests with an
 * error instead of forwarding them, as a failing node does. A request to
 * `/t/<tag>` is forwarded the same way and recorded under its tag (GET
 * /calls/<tag>: `RelayedRequest[]`), so a test whose Worker env names that URL
 * counts its own requests, batches and log ranges apart from other files'.
 * The tests' own clients talk to anvil directly.
 *
 * The relay also holds the Worker to a hosted provider's limits (scripts/lib/rpc-proxy.mjs, the same
 * code as `npm run chain:proxy`): with a project's `chainLimits.enforce`, an `eth_getLogs` over 1,000
 * blocks or a batch over 100 calls is refused as a provider refuses it; without, it is forwarded and
 * counted in GET /stats's `overCaps`. `chainLimits.history` gives the chain that many empty blocks
 * before its contracts, a past longer than the range cap. Both are off unless a project sets them.
 */
export interface TestChain {
  rpcUrl: string;
  chainId: number;
  token: `0x${string}`;
  payTo: `0x${string}`;
  accounts: { address: `0x${string}`; privateKey: `0x${string}` }[];
  vars: Record<string, string>;
  facilitatorUrl: string;
  /**
   * The relay's base URL: GET /sends lists what the Worker sent through it (`RelayedSend[]`); POST /refuse (see
   * above); GET /stats counts its calls and what the provider's caps refused (`RpcProxyStats`).
   */
  relayUrl: string;
  /** The SettlementBatch contract: the batch project's X402_SETTLEMENT_BATCH_ADDRESS. */
  settlementBatch: `0x${string}`;
  /**
   * The audit anchoring contract's creation code: a test deploys its own, since every test file's D1
   * starts its audit chain at seq 1 (the Worker's vars name none, so other files' crons anchor nothing).
   */
  auditAnchor: { abi: unknown[]; bytecode: `0x${string}` };
}

/** One `eth_sendRawTransaction` through the relay; `arrived` and `answered` are steps of one counter, so they order events. */
export interface RelayedSend {
  hash: Hex;
  nonce: number;
  arrived: number;
  answered: number;
}

/** One HTTP request through the relay under a tag: its calls, in order (a batch has several). */
export interface RelayedRequest {
  batch: boolean;
  calls: { method: string; fromBlock?: number; toBlock?: number }[];
}

/** A project's provider limits (its `provide.chainLimits`): see the comment above. */
export interface ChainLimits {
  /** Refuse what a provider with RPC_MAX_LOG_RANGE=1000 and RPC_MAX_BATCH=100 refuses. */
  enforce?: boolean;
  /** Empty blocks mined before the contracts are deployed. */
  history?: number;
}

declare module "vitest" {
  export interface ProvidedContext {
    chain: TestChain;
    chainLimits: ChainLimits;
  }
}

const readBody = (req: import("node:http").IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });

/** What POST /refuse asks the relay to refuse: the next `times` requests with a call of `method` whose body contains `containing`. */
export interface Refusal {
  containing: string;
  method: string;
  times: number;
  /** How long before the refusal is answered. */
  afterMs?: number;
  /** Answer with this HTTP status; without it, each call gets a JSON-RPC error. */
  httpStatus?: number;
  /** The JSON-RPC error's message. */
  message?: string;
  /** Send the JSON-RPC error with this HTTP status (some providers answer errors with a 4xx). */
  rpcErrorStatus?: number;
  /** Forward the request to the node first, then answer with the error: an answer lost on the way back. */
  forwardFirst?: boolean;
  /** Not a refusal: forward the request and hold the node's own answer for `afterMs` (a slow node). */
  holdOnly?: boolean;
}

/** A call as the relay records it: its method, and a log search's block range. */
function recordedCall(c: { method?: string; params?: unknown[] }): RelayedRequest["calls"][number] {
  const method = String(c?.method);
  if (method !== "eth_getLogs") return { method };
  const filter = (c.params?.[0] ?? {}) as { fromBlock?: string; toBlock?: string };
  const block = (b?: string) => (b?.startsWith("0x") ? Number(b) : undefined);
  return { method, fromBlock: block(filter.fromBlock), toBlock: block(filter.toBlock) };
}

/** The relay in front of anvil (see the comment above). */
async function startRelay(rpcUrl: string, limits: ProviderLimits): Promise<{ server: Server; url: string }> {
  const sends: RelayedSend[] = [];
  const forward = forwardTo(rpcUrl);
  const refusals: Refusal[] = [];
  const tagged = new Map<string, RelayedRequest[]>();
  let step = 0;
  const server = createServer(async (req, res) => {
    if (req.method === "GET" && req.url === "/sends") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(sends));
      return;
    }
    if (req.method === "GET" && req.url?.startsWith("/calls/")) {
      const list = tagged.get(req.url.slice("/calls/".length)) ?? [];
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(list));
      return;
    }
    if (req.method === "GET" && req.url === "/stats") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(limits.stats()));
      return;
    }
    const body = await readBody(req);
    if (req.url === "/refuse") {
      const refusal = JSON.parse(body) as Refusal;
      refusals.push({ ...refusal, containing: refusal.containing.toLowerCase().replace(/^0x/, "") });
      res.writeHead(204).end();
      return;
    }
    let calls: { method?: string; params?: unknown[] }[] = [];
    try {
      const parsed = JSON.parse(body);
      calls = Array.isArray(parsed) ? parsed : [parsed];
    } catch {
      // Not JSON: anvil answers it as it would.
    }
    const tag = /^\/t\/([^/?]+)/.exec(req.url ?? "")?.[1];
    if (tag) {
      const list = tagged.get(tag) ?? [];
      tagged.set(tag, list);
      list.push({ batch: body.trimStart().startsWith("["), calls: calls.map(recordedCall) });
    }
    const recorded = calls
      .filter((c) => c?.method === "eth_sendRawTransaction" && typeof c.params?.[0] === "string")
      .map((c) => {
        const raw = c.params![0] as Hex;
        const send: RelayedSend = {
          hash: keccak256(raw),
          nonce: parseTransaction(raw).nonce ?? -1,
          arrived: ++step,
          answered: 0,
        };
        sends.push(send);
        return send;
      });
    // The path too: a refusal `containing` "/t/<tag>" meets only the requests sent under that tag.
    const lowered = `${req.url} ${body}`.toLowerCase();
    const refusal = refusals.find(
      (r) => r.times > 0 && calls.some((c) => c?.method === r.method) && lowered.includes(r.containing),
    );
    if (refusal?.holdOnly) {
      refusal.times--;
      const answer = await fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body });
      const text = await answer.text();
      await new Promise((resolve) => setTimeout(resolve, refusal.afterMs ?? 0));
      for (const send of recorded) send.answered = ++step;
      res.writeHead(answer.status, { "content-type": "application/json" }).end(text);
      return;
    }
    if (refusal) {
      refusal.times--;
      if (refusal.forwardFirst)
        await fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body });
      await new Promise((resolve) => setTimeout(resolve, refusal.afterMs ?? 0));
      for (const send of recorded) send.answered = ++step;
      if (refusal.httpStatus) {
        res.writeHead(refusal.httpStatus).end("refused by the test relay");
        return;
      }
      const answers = calls.map((c) => ({
        jsonrpc: "2.0",
        id: (c as { id?: unknown }).id ?? null,
        error: { code: -32000, message: refusal.message ?? "the relay refused this request" },
      }));
      res
        .writeHead(refusal.rpcErrorStatus ?? 200, { "content-type": "application/json" })
        .end(JSON.stringify(body.trimStart().startsWith("[") ? answers : answers[0]));
      return;
    }
    try {
      // Within the provider's caps, forwarded; over them, refused as a provider refuses (when enforced).
      const answer = await limits.handle(body, forward);
      for (const send of recorded) send.answered = ++step;
      res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.text);
    } catch (error) {
      res.writeHead(502).end(String(error));
    }
  });
  // Idle connections stay open, as anvil keeps them: Node's default closes them after 5 s, and a
  // Worker reusing one just then would see a reset where the chain never failed.
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("RPC relay did not bind");
  return { server, url: `http://127.0.0.1:${address.port}` };
}

/** One project's chain and its servers, as provided to its tests, and how to stop them. */
interface Running {
  provided: TestChain;
  stop: () => Promise<void>;
}

/** A free port on 127.0.0.1, as the system hands it out (a random pick could land on another engineer's chain). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no free port");
  return address.port;
}

const closeServer = async (server: Server) => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
};

async function startChain(limits: ChainLimits): Promise<Running> {
  const started = await startLocalChain({ port: await freePort(), history: limits.history ?? 0 });
  // Stopped by the project's teardown; killed with the process if its project never ran (see `setup`).
  process.once("exit", started.kill);
  // The facilitator double pays gas from account 9, which no test file's Worker has. Files run at once and
  // may each call it: its nonces are counted here (nonceManager), not read from the chain for each send.
  const gasPayer = privateKeyToAccount(started.accounts[9].privateKey, { nonceManager });
  const wallet = createWalletClient({ account: gasPayer, transport: http(started.rpcUrl) });
  const facilitator = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      if (req.url === "/hang/verify") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ isValid: true }));
        return;
      }
      if (req.url === "/hang/settle") {
        // The call the service's own settler makes, encoded by the same function.
        const data = transferCallData(body.paymentPayload.payload);
        if (!data) throw new Error("the authorization's signature is not a valid (r, s, v)");
        await wallet.sendTransaction({ chain: null, to: started.token, data });
        return; // broadcast, then never answer
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => facilitator.listen(0, "127.0.0.1", resolve));
  const address = facilitator.address();
  if (!address || typeof address === "string") throw new Error("facilitator double did not bind");
  const relayed = await startRelay(started.rpcUrl, providerLimits({ enforce: limits.enforce ?? false }));
  return {
    provided: {
      rpcUrl: started.rpcUrl,
      chainId: started.chainId,
      token: started.token,
      payTo: started.payTo,
      accounts: started.accounts,
      // Each test file's Worker gets gas keys of its own over these (vitest.config.ts, test/setup/worker-keys.ts).
      vars: { ...x402Vars(started), RPC_URL: relayed.url },
      settlementBatch: started.batch,
      facilitatorUrl: `http://127.0.0.1:${address.port}/hang/`,
      relayUrl: relayed.url,
      auditAnchor: compileAuditAnchor(),
    },
    stop: async () => {
      await closeServer(relayed.server);
      await closeServer(facilitator);
      await started.stop();
      process.off("exit", started.kill);
    },
  };
}

/**
 * Every project's chain, by project name, in whichever copy of this module vitest loaded for it.
 * vitest runs the projects' global setups one after another before any test: the first one starts
 * the chains of every project this run has test files for, all at once, and each project then takes
 * its own (a chain is deployed in a few seconds, mostly spent waiting for the node).
 */
const RUNNING_KEY = Symbol.for("agent-pay test chains");
const shared = globalThis as Record<symbol, unknown>;
shared[RUNNING_KEY] ??= new Map();
const running = shared[RUNNING_KEY] as Map<string, Promise<Running>>;

/** The projects of this run that use this setup and have test files in it (the run's paths, each project's globs). */
function projectsOfThisRun(project: TestProject): TestProject[] {
  const paths = project.vitest.state.getPaths();
  return project.vitest.projects.filter(
    (p) =>
      [p.config.globalSetup].flat().some((file) => file.endsWith("chain.global.ts")) &&
      paths.some((path) => p.matchesTestGlob(path)),
  );
}

export async function setup(project: TestProject) {
  for (const p of [project, ...projectsOfThisRun(project)]) {
    if (running.has(p.name)) continue;
    const starting = startChain((p.config.provide?.chainLimits as ChainLimits | undefined) ?? {});
    // A failure is its own project's to report, when that project's setup awaits it.
    starting.catch(() => {});
    running.set(p.name, starting);
  }
  const mine = await running.get(project.name)!;
  project.provide("chain", mine.provided);
  return mine.stop;
}
