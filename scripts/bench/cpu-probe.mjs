// `node scripts/bench/cpu-probe.mjs`: the service thread's CPU per request, one kind of request at
// a time, for finding where a path's CPU goes (docs/benchmarks.md, "CPU per request, by phase").
// Starts its own service as `npm run bench` does, sends each phase's requests with a fixed number
// in flight (plain fetch, no autocannon) and reads the service's workerd thread from the kernel
// (/proc/<pid>/task/<tid>/schedstat) before and after: CPU time over requests, whatever the
// machine's load does to the wall clock. Compare phases within one run; run twice before trusting
// a difference under about 15 %.
//
// Settings (environment): PROBE_COUNT (requests per measured phase, default 300),
// PROBE_CONCURRENCY (in flight, default 8), PROBE_ONLY (`x402`, `wallet`, which has checkout-link payments too,
// or `outbound`, outbound x402 authorizations beside their floors and wallet pay; default all three),
// PROBE_PERF (a file: `perf record` of the thread during the x402 settle phase, when perf is there).
// The x402 phases end with x402 settle and facilitator settle (the bench's two settlement rows)
// taking turns, half of PROBE_COUNT each a turn, so the two compare within one run.
// DEV_CRON_SECONDS (default 10 under `npm run dev`) sets how often the dev cron runs its jobs (the
// sweeps of settled payments among them), which land in whichever phase they fall in.
import { spawn } from "node:child_process";
import { call, consoleToken, createAgent, createCharges, createMerchant, inParallel } from "./api.mjs";
import { facilitatorMerchant, settleBodies } from "./facilitator.mjs";
import { allowAnyHost, outboundBody } from "./outbound.mjs";
import { startService } from "./server.mjs";
import { serviceProcesses, snapshot } from "./threads.mjs";
import { signPayments } from "./x402.mjs";

const N = Number(process.env.PROBE_COUNT ?? 300);
const C = Number(process.env.PROBE_CONCURRENCY ?? 8);
const ONLY = process.env.PROBE_ONLY ?? "";
const WARMUP = 60;
const log = (line) => console.log(`[cpu-probe] ${line}`);

const service = await startService({ log: () => {} });
const B = service.url;

/** The service thread's CPU so far, in ns. */
function serviceCpuNs() {
  const reading = snapshot(serviceProcesses(service.pgid, service.port)).readings.find((r) => r.role === "service");
  const thread = reading?.threads && Object.values(reading.threads)[0];
  if (!thread) throw new Error("no service thread found (Linux only)");
  return thread.cpuNs;
}

/** Until the outbox and the webhook deliveries stay empty (as `npm run bench` waits between rows). */
async function quiet() {
  for (let calm = 0; calm < 4; await new Promise((r) => setTimeout(r, 300))) {
    const backlog = await call(B, "GET", "/__bench/backlog");
    calm = backlog.outbox === 0 && backlog.deliveries === 0 ? calm + 1 : 0;
  }
}

/** Runs `count` requests (`send(k)`, k from `from`) `C` at a time and prints the thread's CPU per request. */
async function phase(name, count, send, from = 0) {
  await quiet();
  const cpu0 = serviceCpuNs();
  const t0 = Date.now();
  await inParallel(
    Array.from({ length: count }, (_, k) => from + k),
    C,
    send,
  );
  const cpu1 = serviceCpuNs();
  log(`${name}: ${count} in ${Date.now() - t0} ms, ${((cpu1 - cpu0) / 1e6 / count).toFixed(2)} ms of CPU each`);
}

async function expectOk(response, expected, what) {
  await response.text();
  if (response.status !== expected) throw new Error(`${what} answered ${response.status}`);
}

const get = (path) => async () => expectOk(await fetch(`${B}${path}`), path === "/nothing-here" ? 404 : 200, path);

async function x402Phases(consoleKey) {
  const merchant = await createMerchant(B, consoleKey, "cpu probe x402");
  const charges = await createCharges(B, merchant.apiKey, WARMUP + N, 8);
  const termsOf = async (id) => (await call(B, "GET", `/charges/${id}/x402`, { expected: [402] })).accepts[0];
  const terms = [];
  await phase("x402 terms, first use (assigns the address)", charges.length, async (k) => {
    terms[k] = await termsOf(charges[k]);
  });
  await phase("x402 terms again (402, address known)", charges.length, (k) => termsOf(charges[k]));
  const signed = await signPayments(terms);
  const settle = async (k) =>
    expectOk(
      await fetch(`${B}/charges/${charges[k]}/x402`, { headers: { "x-payment": signed[k].header } }),
      200,
      "settle",
    );
  // A merchant's own route, through the service as its facilitator: each body once, as the bench posts them.
  const own = await facilitatorMerchant(B, consoleKey);
  const bodies = await settleBodies(own.terms, WARMUP + N);
  const facilitated = async (k) => {
    const response = await fetch(`${B}/x402/facilitator/settle`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${own.apiKey}` },
      body: bodies[k],
    });
    const text = await response.text();
    if (response.status !== 200 || !text.includes('"success":true')) throw new Error(`facilitator settle: ${text}`);
  };
  await phase("x402 settle, warm-up", WARMUP, settle);
  await phase("facilitator settle, warm-up", WARMUP, facilitated);
  if (process.env.PROBE_PERF) {
    const tid = serviceProcesses(service.pgid, service.port).find((p) => p.role === "service").pid;
    const args = ["record", "-F", "999", "-g", "-t", String(tid), "-o", process.env.PROBE_PERF, "--", "sleep", "8"];
    spawn("perf", args, { stdio: "ignore" }).on("error", (e) => log(`perf: ${e.message}`));
  }
  const half = Math.floor(N / 2);
  for (let round = 0; round < 2; round++) {
    await phase("x402 settle", half, settle, WARMUP + round * half);
    await phase("facilitator settle", half, facilitated, WARMUP + round * half);
  }
}

async function walletPhases(consoleKey) {
  const shop = await createMerchant(B, consoleKey, "cpu probe shop");
  const agents = await inParallel(
    Array.from({ length: 20 }, (_, i) => `cpu probe agent ${i}`),
    4,
    (name) => createAgent(B, consoleKey, name, 100_000_000),
  );
  const charges = await createCharges(B, shop.apiKey, 2 * N + WARMUP, 8);
  const scratch = await call(B, "POST", "/__bench/setup", { body: { templateChargeId: charges[0], charges: 3 * N } });
  let slot = 0;
  const floor = async () => {
    const i = slot++;
    const body = JSON.stringify({
      i,
      agentId: scratch.agentIds[i % scratch.agentIds.length],
      merchantId: scratch.merchantId,
    });
    const response = await fetch(`${B}/__bench/do-d1-batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    await expectOk(response, 200, "floor");
  };
  const pay = async (k) => {
    const headers = { authorization: `Bearer ${agents[k % agents.length].apiKey}` };
    await expectOk(await fetch(`${B}/charges/${charges[k]}/pay`, { method: "POST", headers }), 200, "wallet pay");
  };
  const link = await call(B, "POST", "/merchant/checkout", {
    token: shop.apiKey,
    body: { amountUsdCents: 1, description: "cpu probe" },
  });
  const payLink = async (k) => {
    const headers = { authorization: `Bearer ${agents[k % agents.length].apiKey}` };
    const response = await fetch(`${B}/checkout/${link.checkoutToken}/pay`, { method: "POST", headers });
    await expectOk(response, 200, "checkout-link pay");
  };
  await phase("floor: DO RPC + payment-sized batch, warm-up", WARMUP, floor);
  await phase("wallet pay, warm-up", WARMUP, pay);
  await phase("checkout-link pay, warm-up", WARMUP, payLink);
  // Taking turns, as the bench's payment rows do.
  for (let round = 0; round < 2; round++) {
    await phase("floor: DO RPC + payment-sized batch", N, floor);
    await phase("wallet pay across agents", N, pay, WARMUP + round * N);
    await phase("checkout-link pay", N, payLink);
  }
  await call(B, "POST", "/__bench/teardown");
}

/**
 * Outbound x402 authorizations (POST /agent/x402/payments) taking turns with their floor (the
 * settlement key's signature + DO RPC + payment-sized batch), the floor without the signature, and
 * wallet pay: the signature's share is the two floors' difference, the rest of the path's cost
 * beyond the floor is the authorization's minus its floor's.
 */
async function outboundPhases(consoleKey) {
  const shop = await createMerchant(B, consoleKey, "cpu probe outbound");
  const agents = await inParallel(
    Array.from({ length: 20 }, (_, i) => `cpu probe outbound agent ${i}`),
    4,
    (name) => createAgent(B, consoleKey, name, 100_000_000),
  );
  await allowAnyHost(B, consoleKey, agents);
  const charges = await createCharges(B, shop.apiKey, 2 * N + WARMUP, 8);
  const [terms] = (await call(B, "GET", `/charges/${charges[0]}/x402`, { expected: [402] })).accepts;
  const outbound = outboundBody(terms);
  const scratch = await call(B, "POST", "/__bench/setup", { body: { templateChargeId: charges[0], charges: 6 * N } });
  let slot = 0;
  const floorOf = (path) => async () => {
    const i = slot++;
    const body = JSON.stringify({
      i,
      agentId: scratch.agentIds[i % scratch.agentIds.length],
      merchantId: scratch.merchantId,
    });
    const response = await fetch(`${B}/__bench/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    await expectOk(response, 200, path);
  };
  const authorize = async (k) => {
    const headers = { "content-type": "application/json", authorization: `Bearer ${agents[k % agents.length].apiKey}` };
    const response = await fetch(`${B}/agent/x402/payments`, { method: "POST", headers, body: outbound });
    await expectOk(response, 201, "outbound authorization");
  };
  const pay = async (k) => {
    const headers = { authorization: `Bearer ${agents[k % agents.length].apiKey}` };
    await expectOk(await fetch(`${B}/charges/${charges[k]}/pay`, { method: "POST", headers }), 200, "wallet pay");
  };
  await phase("floor: signature + DO RPC + batch, warm-up", WARMUP, floorOf("sign-do-d1-batch"));
  await phase("outbound authorizations, warm-up", WARMUP, authorize);
  await phase("wallet pay, warm-up", WARMUP, pay);
  for (let round = 0; round < 2; round++) {
    await phase("floor: DO RPC + payment-sized batch", N, floorOf("do-d1-batch"));
    await phase("floor: signature + DO RPC + batch", N, floorOf("sign-do-d1-batch"));
    await phase("outbound authorizations across agents", N, authorize);
    await phase("wallet pay across agents", N, pay, WARMUP + round * N);
  }
  await call(B, "POST", "/__bench/teardown");
}

const want = (group) => ONLY === "" || ONLY === group;

try {
  await phase("bench noop (warm-up)", N, get("/__bench/noop"));
  await phase("bench noop", N, get("/__bench/noop"));
  await phase("service 404", N, get("/nothing-here"));
  const consoleKey = consoleToken(B);
  if (want("x402")) await x402Phases(consoleKey);
  if (want("wallet")) await walletPhases(consoleKey);
  if (want("outbound")) await outboundPhases(consoleKey);
} finally {
  await service.stop();
}
