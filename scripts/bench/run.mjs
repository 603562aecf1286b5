// `npm run bench`: starts the service as `npm run dev` does (on its own ports and a throw-away
// state directory), seeds it through the public API, measures the runtime floors and every
// scenario of issue #8 with autocannon from this process, prints one table (requests per second,
// p50/p99, errors, the service thread's CPU, ratio to the floor, the target), then one line per cost
// target (scripts/bench/targets.mjs: met, NOT met, or "-") and writes the same as JSON to bench/results/.
// docs/benchmarks.md says what each row measures. It stops everything it started, on success,
// on error and on Ctrl-C.
//
// Settings (environment): BENCH_SECONDS (measured seconds per scenario, default 6),
// BENCH_WARMUP (warm-up seconds, default 2), BENCH_CONNECTIONS (default 32),
// BENCH_PAIRS and BENCH_PAIR_SECONDS (the payment rows alternate with their floor: pairs of windows,
// default 3 of BENCH_SECONDS / 3), BENCH_X402_WARMUP and BENCH_X402_SETTLEMENTS (x402 settlement runs by count: default 50 per
// warm-up second and 100 per measured second; payouts use the same counts), BENCH_ONLY (a
// comma-separated subset of the row groups below, for a quick look at one path; the table then
// shows "-" for the rest), BENCH_STORAGE_PAYMENTS (wallet payments per round of the bytes-per-payment
// measurement, default 1,000). The group `shards` runs only when BENCH_ONLY names it: after the other
// groups, with a second service of its own running LEDGER_SHARDS=2 (DEV_LEDGER_SHARDS, scripts/dev.mjs).
import { mnemonicKey } from "../lib/chain.mjs";
import { call, consoleToken, createAgent, createCharges, createMerchant, inParallel } from "./api.mjs";
import { FACILITATED_VALUE, facilitatorMerchant, facilitatorSettle, settleBodies } from "./facilitator.mjs";
import { load } from "./load.mjs";
import { allowAnyHost, authorizedDollars, OUTBOUND_BASE_UNITS, outboundBody } from "./outbound.mjs";
import { alternate, cpuMsPerOk, median } from "./pairs.mjs";
import { paidResult, payoutMerchant, untilDecided } from "./payouts.mjs";
import { startReceiver } from "./receiver.mjs";
import { table, writeJson } from "./report.mjs";
import { startService } from "./server.mjs";
import { measureStorage } from "./storage.mjs";
import { cpuTarget, crossingCost, settleNote, settleSteps, summaryLine } from "./targets.mjs";
import { describeUsage, threadMeter } from "./threads.mjs";
import { blockNumber, chainSettleFloor, chainSnapshot, settlementGas, signPayments, signTransfers } from "./x402.mjs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Each payment row takes turns with its floor: this many pairs of windows (floor, row), ... */
const PAIRS = Number(process.env.BENCH_PAIRS ?? 3);
/** ... of this many measured seconds each (together the row's BENCH_SECONDS by default). */
const PAIR_SECONDS = Number(process.env.BENCH_PAIR_SECONDS ?? Math.max(1, Math.round(SECONDS / PAIRS)));
if (!(Number.isInteger(PAIRS) && PAIRS >= 1)) throw new Error("BENCH_PAIRS must be a whole number of at least 1");
const AGENTS = 100;
/** Rows judged by their rate against the floor (outbound, the shards' within rows): at least the floor's. */
const PAY_RATIO_TARGET = 1.0;
/**
 * The payment rows (wallet, checkout link, PayLink draws): the service thread's CPU per payment at most
 * this many times the floor's (DO RPC + payment-sized batch) per request, in the same pairs of windows.
 */
const PAY_CPU_RATIO_TARGET = 1.1;
/** x402 settle: CPU per settlement at most this many times the sum of its necessary steps ... */
const SETTLE_STEPS_RATIO_TARGET = 1.25;
/** ... at this share of the chain floor's rate or more. */
const SETTLE_CHAIN_RATIO_TARGET = 1.0;
/** A payment across two shards costs at most this many times one within a shard (statements, batches, CPU). */
const CROSSING_COST_TARGET = 1.3;
const GRANTS = 50;
/** Wallet payments per round of the storage measurement (BENCH_STORAGE_PAYMENTS): 1,000 reads a size to 4 bytes a payment. */
const STORAGE_PAYMENTS = Number(process.env.BENCH_STORAGE_PAYMENTS ?? 1000);
// Each payment to the webhook merchant makes two events (payment.succeeded, charge.succeeded).
const WEBHOOK_EVENTS_PER_SECOND = 100;
const WEBHOOK_PAYMENTS_PER_SECOND = WEBHOOK_EVENTS_PER_SECOND / 2;
const WEBHOOK_SECONDS = 8;
/** The steps `POST /__bench/step` times (bench/routes.ts), as the progress names them. */
const STEPS = [
  ["d1_read", "one D1 round trip (a one-statement read)"],
  ["do_rpc", "one Durable Object RPC"],
  ["rpc_call", "one JSON-RPC call to the chain"],
  ["rpc_call_viem", "the same through viem's client"],
  ["sign_transaction", "the settler's transaction signature"],
  ["sign_authorization", "an outbound authorization's signature by the settlement key"],
  ["rpc_check_batch", "the chain's check batch (checkTransfer's JSON-RPC batch)"],
];
/** x402 settlement is measured by count, not time: warm-up settlements, then measured ones (chainSnapshot says why). */
const X402_WARMUP = Math.round(Number(process.env.BENCH_X402_WARMUP ?? 50 * WARMUP));
const X402_MEASURED = Math.round(Number(process.env.BENCH_X402_SETTLEMENTS ?? 100 * SECONDS));
// autocannon sends at least one request per connection.
if (!(X402_MEASURED >= CONNECTIONS))
  throw new Error(`BENCH_X402_SETTLEMENTS must be at least BENCH_CONNECTIONS (${CONNECTIONS})`);
if (!(X402_WARMUP === 0 || X402_WARMUP >= CONNECTIONS))
  throw new Error(`BENCH_X402_WARMUP must be 0 or at least BENCH_CONNECTIONS (${CONNECTIONS})`);
const CREDIT = 100_000_000; // $1M each: no scenario may run an agent dry
/** Each payout merchant earns $10,000 before its 1-cent payouts. */
const PAYOUT_FUNDS = 1_000_000;
/** The service's settlement key (scripts/lib/chain.mjs): the payouts' chain floor signs with it, as the service does. */
const SETTLEMENT_KEY = mnemonicKey(10);
/** Row groups, by the prefix of their keys; BENCH_ONLY picks some. */
const GROUPS = {
  floors: /^(floor_(?!chain)|steps$)/,
  charges: /^charge_creation$/,
  wallet: /^(wallet_pay|checkout_link)/,
  paylinks: /^paylink_/,
  outbound: /^outbound_/,
  x402: /^(x402_|floor_chain_settle$)/,
  payouts: /^(payouts_|floor_chain_payouts$)/,
  webhooks: /^webhook_/,
  storage: /^storage$/,
  shards: /^shards_/,
};
/**
 * Groups run only when BENCH_ONLY names them: the shards group starts a service of its own (two
 * ledger shards), so the default run, its one service and its table stay as they were.
 */
const OPT_IN = ["shards"];
const ONLY = (process.env.BENCH_ONLY ?? "")
  .split(",")
  .map((g) => g.trim())
  .filter(Boolean);
for (const g of ONLY)
  if (!(g in GROUPS)) throw new Error(`BENCH_ONLY: unknown group "${g}"; groups: ${Object.keys(GROUPS).join(", ")}`);
const selected = (key) =>
  ONLY.length === 0 ? !OPT_IN.some((g) => GROUPS[g].test(key)) : ONLY.some((g) => GROUPS[g].test(key));
/** The default service's rows: any group but the opt-in ones (a run of BENCH_ONLY=shards starts only the shards' service). */
const mainSelected = ONLY.length === 0 || ONLY.some((g) => !OPT_IN.includes(g));
/** The shards group's service runs this many ledger shards, new owners placed on a random one (`spread`). */
const LEDGER_SHARDS = 2;

const startedAt = new Date();
const t0 = Date.now();
const log = (line) => console.log(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(3)} s] ${line}`);
const ms = (n) => (n < 10 ? n.toFixed(1) : n.toFixed(0));
const summary = (r) =>
  `${r.okRps.toFixed(r.okRps < 100 ? 1 : 0)} req/s, p50 ${ms(r.p50)} ms, p99 ${ms(r.p99)} ms, ${r.errors} errors`;

let service = null;
let receiver = null;
let stopping = null;
/** Stops what this run started; safe to call more than once. */
const stopAll = () =>
  (stopping ??= (async () => {
    await Promise.allSettled([service?.stop(), receiver?.close()]);
  })());

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    log(`${signal}: stopping the service`);
    await stopAll();
    process.exit(130);
  });
}

const json = (body) => ({ "content-type": "application/json", ...body });

/**
 * The measuring helpers every scenario uses: `quiet` waits for the service's queued work, `measure`
 * runs one row and keeps its full result in `raw` (the JSON file's results), `perStep` times one step.
 */
function meter(B, { shards = [0] } = {}) {
  const raw = {};
  /** Each shard's sequencer counts (shard 0's through the route's default, as before shards). */
  const ledgerStats = () =>
    Promise.all(shards.map((k) => call(B, "GET", k === 0 ? "/__bench/ledger" : `/__bench/ledger?shard=${k}`)));
  let reloadsSeen = service.reloads();

  /**
   * Waits until the service has no queued work left (outbox fan-out, webhook deliveries) for over
   * a second, so a scenario does not pay for the one before it.
   */
  const quiet = async () => {
    const deadline = Date.now() + 45_000;
    for (let calm = 0; Date.now() < deadline; await new Promise((r) => setTimeout(r, 300))) {
      const backlog = await call(B, "GET", "/__bench/backlog");
      calm = backlog.outbox === 0 && backlog.deliveries === 0 ? calm + 1 : 0;
      if (calm >= 4) return;
    }
    log("  warning: the service still had queued work after 45 s; measuring anyway");
  };

  /**
   * One row: waits for a quiet service, runs `fn`, notes whether the service reloaded meanwhile, prints a
   * line. `always`: run it though BENCH_ONLY left it out (a floor another target needs). `paid`: counts
   * the payments made (warm-ups and in-flight ones included), read with the sequencer's counts.
   */
  const measure = async (key, name, kind, fn, { always = false, paid = null } = {}) => {
    if (!(always || selected(key))) return null;
    await quiet();
    log(`${name} ...`);
    reloadsSeen = service.reloads();
    const [ledgersBefore, paidBefore] = await Promise.all([ledgerStats(), paid?.()]);
    // A row that counts its payments wants every commit in the span: its ledger objects are read every
    // 2 s meanwhile, which keeps them from being evicted while inputs are prepared, and adds up what
    // each did between reads (all of it since it started, should one start again).
    const tracked = paid ? trackLedgers(ledgerStats, ledgersBefore) : null;
    const result = await fn();
    const [ledgersAfter, paidAfter] = await Promise.all([tracked ? tracked.stop() : ledgerStats(), paid?.()]);
    const reloads = service.reloads() - reloadsSeen;
    reloadsSeen = service.reloads();
    if (reloads > 0)
      log(
        `  warning: the service reloaded ${reloads} time(s) during this run (a source file changed); its numbers are suspect`,
      );
    const unanswered =
      result.requests === 0 && result.unanswered > 0
        ? ` (none of ${result.unanswered} requests answered within the window)`
        : "";
    log(
      `  ${summary(result)}${unanswered}${result.exhausted ? " (ran out of prepared inputs: rate undercounted)" : ""}`,
    );
    // Group commit at work: the plans the sequencer committed during the run (warm-up included), per D1
    // batch, and the statements those batches ran per plan.
    // A ledger object that restarted meanwhile counts from zero again: then its counts are those since
    // it started (`sinceRestart`). Idle objects are evicted (an idle shard's during another shard's row,
    // or any while inputs are prepared), so what it did before it went idle and was evicted is all
    // that can be missing, and an idle shard's counts are exact.
    const ledgers = tracked ? ledgersAfter : ledgersAfter.map((after, i) => countsBetween(ledgersBefore[i], after));
    for (const [i, counts] of ledgers.entries()) {
      if (!(counts.batches > 0)) continue;
      const perBatch = (counts.plans / counts.batches).toFixed(1);
      log(
        `  ledger${shards.length > 1 ? ` shard ${shards[i]}` : ""}: ${counts.plans} plans in ${counts.batches} D1 batches (${perBatch} per batch, ${(counts.statements / counts.plans).toFixed(1)} statements per plan)${counts.sinceRestart ? " (since its object restarted during the row)" : ""}`,
      );
    }
    const [ledger] = ledgers;
    const threads = describeUsage(result.threads);
    if (threads) log(`  threads: ${threads}`);
    raw[key] = { name, kind, ...result, reloads, ledger };
    if (paid) raw[key].payments = paidAfter - paidBefore;
    if (shards.length > 1) raw[key].ledgerByShard = Object.fromEntries(shards.map((k, i) => [k, ledgers[i]]));
    return result;
  };

  /**
   * What one step costs on an otherwise idle service: a request doing it `n + 1` times and one
   * doing it once, one at a time; the difference over `n` (median of 5), in time (`ms`) and in the
   * service thread's CPU (`cpuMs`, null off Linux). Routing and I/O to the bench cancel out; on a
   * busy machine the numbers only err high.
   */
  const stepCost = async (path, body, n = 50) => {
    const meter = threadMeter(service.pgid, service.port);
    const timed = async (iterations) => {
      const begun = meter.begin();
      const began = performance.now();
      await call(B, "POST", path, { body: { ...body, iterations } });
      return { ms: performance.now() - began, cpuMs: meter.cpuMs(begun) };
    };
    await timed(n + 1);
    const wall = [];
    const cpu = [];
    for (let k = 0; k < 5; k++) {
      const [many, one] = [await timed(n + 1), await timed(1)];
      wall.push((many.ms - one.ms) / n);
      if (many.cpuMs !== null && one.cpuMs !== null) cpu.push((many.cpuMs - one.cpuMs) / n);
    }
    return { ms: median(wall), cpuMs: median(cpu) };
  };
  const perStep = async (path, body, n = 50) => (await stepCost(path, body, n)).ms;
  return { raw, quiet, measure, perStep, stepCost };
}

/** What a ledger object counted between two reads of its stats: all since it started, if it started again. */
function countsBetween(before, after) {
  const restarted = after.started !== before.started;
  const from = restarted ? { plans: 0, batches: 0, statements: 0 } : before;
  return {
    plans: after.plans - from.plans,
    batches: after.batches - from.batches,
    statements: after.statements - from.statements,
    ...(restarted ? { sinceRestart: true } : {}),
  };
}

/**
 * Reads the ledger objects' stats every 2 s from `first` on, adding up each one's counts between
 * reads; `stop()` reads them a last time and answers the sums (`sinceRestart` when one started again:
 * what it did after its last read before that is lost, and an object is evicted only once idle).
 */
function trackLedgers(read, first) {
  let last = first;
  const sums = first.map(() => ({ plans: 0, batches: 0, statements: 0 }));
  const add = (now) => {
    for (const [i, stats] of now.entries()) {
      const d = countsBetween(last[i], stats);
      sums[i].plans += d.plans;
      sums[i].batches += d.batches;
      sums[i].statements += d.statements;
      if (d.sinceRestart) sums[i].sinceRestart = true;
    }
    last = now;
  };
  let reading = Promise.resolve();
  const timer = setInterval(() => {
    reading = reading.then(async () => add(await read())).catch(() => {});
  }, 2_000);
  return {
    stop: async () => {
      clearInterval(timer);
      await reading;
      add(await read());
      return sums;
    },
  };
}

/** Seeds the merchants, agents, checkout link, PayLinks and grants the scenarios use; returns them with the load settings. */
async function seed(B) {
  log("seeding: console token, merchants, agents, a checkout link, PayLinks and grants");
  const consoleKey = consoleToken(B);
  const [shop, links, budgets, hooks, onchain] = await inParallel(
    ["bench shop", "bench links", "bench budgets", "bench hooks", "bench x402"],
    5,
    (name) => createMerchant(B, consoleKey, name),
  );
  const crowd = await inParallel(
    Array.from({ length: AGENTS }, (_, i) => `bench agent ${i}`),
    8,
    (name) => createAgent(B, consoleKey, name, CREDIT),
  );
  const [hot, drawer] = await inParallel(["bench hot agent", "bench grant agent"], 2, (name) =>
    createAgent(B, consoleKey, name, CREDIT),
  );
  const link = await call(B, "POST", "/merchant/checkout", {
    token: links.apiKey,
    body: { amountUsdCents: 1, description: "bench" },
  });
  const budget = { budgetUsdCents: 10_000_000_000 };
  const oneGrant = await call(B, "POST", "/merchant/paylinks", { token: budgets.apiKey, body: budget });
  await call(B, "POST", `/pl/${oneGrant.code}/accept`, { token: drawer.apiKey });
  const manyGrants = await call(B, "POST", "/merchant/paylinks", { token: budgets.apiKey, body: budget });
  await inParallel(crowd.slice(0, GRANTS), 8, (a) =>
    call(B, "POST", `/pl/${manyGrants.code}/accept`, { token: a.apiKey }),
  );
  const [template] = await createCharges(B, shop.apiKey, 1);
  log(`  ${AGENTS + 2} agents with $${(CREDIT / 100).toLocaleString("en-US")} each, 5 merchants, ${GRANTS + 1} grants`);

  const base = {
    url: B,
    connections: CONNECTIONS,
    warmupSeconds: WARMUP,
    seconds: SECONDS,
    meter: threadMeter(service.pgid, service.port),
  };
  return {
    consoleKey,
    shop,
    links,
    budgets,
    hooks,
    onchain,
    crowd,
    hot,
    drawer,
    link,
    oneGrant,
    manyGrants,
    template,
    base,
  };
}

/** Row groups whose rows take turns with the floor "DO RPC + payment-sized batch" (alternated). */
const PAYMENT_GROUPS = ["wallet", "paylinks", "outbound"];
const paymentRowsSelected = () => PAYMENT_GROUPS.some((g) => ONLY.length === 0 || ONLY.includes(g));
/**
 * x402 settle's target is judged against the sum of its necessary steps, priced in the same run: the
 * trivial route, the payment-sized batch floor and the step costs run for it whatever BENCH_ONLY says.
 */
const settleStepsNeeded = () => selected("x402_settle");
const needsScratch = () => selected("floor_do_rpc_d1_batch") || paymentRowsSelected() || settleStepsNeeded();

/**
 * Scratch copies of the payment's tables with a pool of pending charges cloned from `run.template`
 * (bench/batch.ts), and the load of the floor "DO RPC + payment-sized batch" on them, which becomes
 * `run.floorOptions`; `floorBody` makes the next batch's body.
 */
async function scratchFloor(run, poolSize = 160_000) {
  const { B, base, template } = run;
  const scratch = await call(B, "POST", "/__bench/setup", {
    body: { templateChargeId: template, charges: poolSize },
  });
  let slot = 0;
  const floorBody = () => {
    const i = slot++;
    if (i >= poolSize) throw new Error("the scratch charge pool ran out; raise poolSize");
    return JSON.stringify({
      i,
      agentId: scratch.agentIds[i % scratch.agentIds.length],
      merchantId: scratch.merchantId,
    });
  };
  const rpcBatchLoad = {
    ...base,
    next: () => ({ method: "POST", path: "/__bench/do-d1-batch", headers: json(), body: floorBody() }),
  };
  run.floorOptions = rpcBatchLoad;
  run.floorBody = floorBody;
  return { floorBody, rpcBatchLoad };
}

/**
 * The runtime floors (bench/routes.ts), into `run.floor`; returns the payment batch's statement
 * count. Leaves the scratch tables in place, with `run.floorOptions` (the load of the floor "DO RPC
 * + payment-sized batch") for the payment rows that alternate with it; `dropScratch` ends them.
 */
async function measureFloors(run) {
  const { B, base, floor, measure } = run;
  if (!needsScratch()) return null;
  // The floors alone (x402's steps) need one floor's windows of charges, not the payment rows' pool.
  const floorsOnly = !(selected("floor_do_rpc_d1_batch") || paymentRowsSelected());
  const { floorBody, rpcBatchLoad } = await scratchFloor(run, floorsOnly ? 20_000 : 160_000);
  const forSteps = { always: settleStepsNeeded() };
  floor.noop = await measure(
    "floor_trivial_route",
    "floor: trivial route",
    "floor",
    () => load({ ...base, next: () => ({ path: "/__bench/noop" }) }),
    forSteps,
  );
  floor.rpc = await measure("floor_do_rpc", "floor: one Durable Object RPC", "floor", () =>
    load({ ...base, next: () => ({ method: "POST", path: "/__bench/do-rpc" }) }),
  );
  floor.batch = await measure(
    "floor_d1_batch",
    "floor: one payment-sized D1 batch",
    "floor",
    () =>
      load({
        ...base,
        next: () => ({ method: "POST", path: "/__bench/d1-batch", headers: json(), body: floorBody() }),
      }),
    forSteps,
  );
  floor.rpcBatch = await measure("floor_do_rpc_d1_batch", "floor: DO RPC + payment-sized batch", "floor", () =>
    load(rpcBatchLoad),
  );
  floor.serial = await measure("floor_do_rpc_d1_batch_serial", "floor: same, one batch at a time", "floor", () =>
    load({
      ...base,
      next: () => ({ method: "POST", path: "/__bench/do-d1-batch-serial", headers: json(), body: floorBody() }),
    }),
  );
  return (await call(B, "POST", "/__bench/d1-batch", { body: JSON.parse(floorBody()) })).statements;
}

/** Drops the floors' scratch tables once the payment rows that alternate with the floor are done. */
async function dropScratch(run) {
  if (run.floorOptions) await call(run.B, "POST", "/__bench/teardown");
  run.floorOptions = null;
}

/**
 * A payment row measured in turns with its floor (pairs.mjs): `PAIRS` pairs of `PAIR_SECONDS`
 * windows, each side warmed up once before its first window. The floor is "DO RPC + payment-sized
 * batch" unless `floorOptions` names another; `paid` counts the row's payments (measure).
 */
function alternated(run, key, name, rowOptions, floorOptions = run.floorOptions, paid = null) {
  const { measure, quiet } = run;
  return measure(
    key,
    name,
    "scenario",
    async () => {
      const result = await alternate({
        load,
        floorOptions,
        rowOptions,
        pairs: PAIRS,
        seconds: PAIR_SECONDS,
        between: quiet,
        log,
      });
      const cpu = result.cpuRatio;
      if (cpu)
        log(
          `  cpu per request ${cpuMsPerOk(result)?.toFixed(2)} ms, its floor windows' ${cpuMsPerOk(result.floor)?.toFixed(2)} ms: ` +
            `ratio ${cpu.median.toFixed(2)} (${cpu.min.toFixed(2)}-${cpu.max.toFixed(2)})`,
        );
      return result;
    },
    { paid },
  );
}

/**
 * What each step of a payment costs, one at a time (docs/benchmarks.md): `steps` in time, `stepsCpu`
 * in the service thread's CPU. Run for the floors group, and for x402 settle's target.
 */
async function measureSteps(run) {
  const { stepCost } = run;
  if (!(selected("steps") || settleStepsNeeded())) return { steps: null, stepsCpu: null };
  log("step costs, one at a time on an idle service ...");
  const steps = {};
  const stepsCpu = {};
  for (const [step, label] of STEPS) {
    const cost = await stepCost("/__bench/step", { step });
    steps[step] = cost.ms;
    stepsCpu[step] = cost.cpuMs;
    log(`  ${label}: ${cost.ms.toFixed(2)} ms, ${cost.cpuMs?.toFixed(2) ?? "-"} ms of the thread's CPU`);
  }
  return { steps, stepsCpu };
}

/** Charge creation, which also makes the charges the wallet scenarios pay. */
async function measureChargeCreation(run) {
  const { base, measure, shop } = run;
  const pending = [];
  const chargeCreation = await measure("charge_creation", "charge creation", "scenario", () =>
    load({
      ...base,
      next: () => ({
        method: "POST",
        path: "/merchant/charges",
        headers: json({ authorization: `Bearer ${shop.apiKey}` }),
        body: '{"amountUsdCents":1}',
      }),
      onResponse: (status, body) => {
        if (status === 201) pending.push(JSON.parse(body).chargeId);
      },
    }),
  );
  return { chargeCreation, pending };
}

/** Inputs for `rate` successful requests a second over `seconds`, with a margin for a faster run. */
const inputsFor = (rate, seconds) => Math.ceil(rate * seconds * 1.6) + CONNECTIONS * 2;

/** Fills `list` up to `want` with `make(n)`; preparing inputs is never part of a measured window. */
async function topUp(list, want, what, make) {
  if (list.length >= want) return;
  log(`  preparing ${want - list.length} ${what}`);
  list.push(...(await make(want - list.length)));
}

/**
 * Wallet-payment scenarios paying the pending charges in `pending` (ids), made by `makeCharges(n)`
 * when it runs low: each request pays its own pending charge. The warm-up runs on a guess; the
 * measured run gets what the warm-up's rate says it needs (prepared in between).
 */
function walletScenarios(run, pending, makeCharges, paid = null) {
  const { base, floor, quiet, raw } = run;
  let ranDry = 0;
  const nextPending = () => {
    const id = pending.pop();
    if (id) return id;
    ranDry++;
    return "chg_pool_ran_dry";
  };
  return async (key, name, agentOf, guess) => {
    if (!selected(key)) return null;
    await topUp(pending, inputsFor(guess, WARMUP), "pending charges", makeCharges);
    const result = await alternated(
      run,
      key,
      name,
      {
        ...base,
        next: () => ({
          method: "POST",
          path: `/charges/${nextPending()}/pay`,
          headers: { authorization: `Bearer ${agentOf().apiKey}` },
        }),
        afterWarmup: async (warm) => {
          // A path may outrun its floor (group commit), and a warm-up that woke 100 objects undercounts.
          await topUp(
            pending,
            inputsFor(Math.max(warm.okRps, floor.rpcBatch?.okRps ?? 0), PAIRS * PAIR_SECONDS),
            "pending charges",
            makeCharges,
          );
          await quiet();
          ranDry = 0;
        },
      },
      run.floorOptions,
      paid,
    );
    if (ranDry > 0) {
      raw[key].exhausted = true;
      log(`  warning: ${ranDry} requests found no pending charge left (counted as errors)`);
    }
    return result;
  };
}

/** Wallet payments across the agents and from one hot agent, each paying its own pending charge. */
async function measureWalletPayments(run, chargeCreation, pending) {
  const { B, crowd, floor, hot, shop } = run;
  const payScenario = walletScenarios(run, pending, (n) => createCharges(B, shop.apiKey, n, CONNECTIONS));

  // --- Wallet payments --------------------------------------------------------------------------
  // A payment does strictly more than a charge creation or the floor, so neither rate is exceeded.
  const payGuess = Math.min(floor.rpcBatch?.okRps ?? 200, chargeCreation?.okRps ?? 200);
  const across = await payScenario(
    "wallet_pay_across_agents",
    `wallet pay, ${AGENTS} agents`,
    () => crowd[run.turn++ % crowd.length],
    payGuess,
  );
  const hotAgent = await payScenario(
    "wallet_pay_hot_agent",
    "wallet pay, one hot agent",
    () => hot,
    across?.okRps ?? payGuess,
  );
  return { across, hotAgent, payGuess };
}

/** Checkout-link payments by the crowd of agents. */
function measureCheckout(run) {
  const { base, crowd, link } = run;
  return alternated(run, "checkout_link_pay", "checkout-link pay", {
    ...base,
    next: () => ({
      method: "POST",
      path: `/checkout/${link.checkoutToken}/pay`,
      headers: { authorization: `Bearer ${crowd[run.turn++ % crowd.length].apiKey}` },
    }),
  });
}

/** PayLink draws on one grant, and across many. */
async function measurePaylinks(run) {
  const { base, budgets, crowd, drawer, manyGrants, oneGrant } = run;
  const draw = (code, agentId) => ({
    method: "POST",
    path: `/merchant/paylinks/${code}/charge`,
    headers: json({ authorization: `Bearer ${budgets.apiKey}` }),
    body: JSON.stringify({ agentId, amountUsdCents: 1 }),
  });
  const drawOne = await alternated(run, "paylink_draw_one_grant", "PayLink draw, one grant", {
    ...base,
    next: () => draw(oneGrant.code, drawer.agentId),
  });
  const drawMany = await alternated(run, "paylink_draw_many_grants", `PayLink draw, ${GRANTS} grants`, {
    ...base,
    next: () => draw(manyGrants.code, crowd[run.turn++ % GRANTS].agentId),
  });
  return { drawOne, drawMany };
}

/**
 * Outbound x402 authorizations (issue #41): the crowd of agents in turn pays a paywall's $0.001
 * through `POST /agent/x402/payments`, each request one signature by the settlement key and one
 * ledger commit, in turns with its floor: that signature, then one DO RPC running a payment-sized
 * batch (`/__bench/sign-do-d1-batch`). First the signature alone, one at a time.
 */
async function measureOutbound(run) {
  if (!selected("outbound_authorizations")) return null;
  const { B, base, consoleKey, crowd, onchain, perStep, raw } = run;
  log(`  allowing x402 payments to any host for the ${crowd.length} agents`);
  await allowAnyHost(B, consoleKey, crowd);
  const [probe] = await createCharges(B, onchain.apiKey, 1);
  const [terms] = (await call(B, "GET", `/charges/${probe}/x402`, { expected: [402] })).accepts;
  const body = outboundBody(terms);
  const signatureMs = await perStep("/__bench/step", { step: "sign_authorization" });
  log(`  the settlement key's authorization signature alone: ${signatureMs.toFixed(2)} ms (one at a time)`);
  const result = await alternated(
    run,
    "outbound_authorizations",
    `outbound x402 authorizations, ${AGENTS} agents`,
    {
      ...base,
      next: () => ({
        method: "POST",
        path: "/agent/x402/payments",
        headers: json({ authorization: `Bearer ${crowd[run.turn++ % crowd.length].apiKey}` }),
        body,
      }),
      expect: (status) => status === 201,
    },
    {
      ...run.floorOptions,
      next: () => ({ method: "POST", path: "/__bench/sign-do-d1-batch", headers: json(), body: run.floorBody() }),
    },
  );
  const authorized = result.statuses["201"] ?? 0;
  raw.outbound_authorizations.signatureMs = signatureMs;
  raw.outbound_authorizations.baseUnitsEach = Number(OUTBOUND_BASE_UNITS);
  log(
    `  ${authorized} authorizations in the measured windows, $${authorizedDollars(authorized).toFixed(2)} outstanding from them` +
      " (the warm-ups' add to it; none is settled)",
  );
  return result;
}

/**
 * Takes the chain back to before a chain floor (chainSnapshot). Had the service sent anything in
 * between, its lanes now wait on nonces the chain lost: every chain row after that is suspect.
 */
async function revertAfterFloor(revert, result) {
  const undone = await revert();
  if (undone === 0) return;
  result.serviceSendsUndone = undone;
  log(
    `  warning: the revert undid ${undone} transaction(s) the service sent during the floor; the chain rows after this are suspect`,
  );
}

/** x402: verification alone (and its CPU), then settlement against the chain's own floor. */
async function measureX402(run) {
  if (!selected("x402_settle")) return { verify: null, verifyCpuMs: null, settle: null };
  const { B, base, floor, measure, onchain, perStep, quiet, raw } = run;
  const [x402Probe] = await createCharges(B, onchain.apiKey, 1);
  const termsOf = async (chargeId) =>
    (await call(B, "GET", `/charges/${chargeId}/x402`, { expected: [402] })).accepts[0];
  const terms = await termsOf(x402Probe);
  const verifySamples = await signPayments(Array(64).fill(terms));
  const verifyBody = (header, iterations) => JSON.stringify({ header, amountMinor: 1, payTo: terms.payTo, iterations });
  let v = 0;
  const verify = await measure("x402_verify", "x402 verify (signature and checks)", "scenario", () =>
    load({
      ...base,
      next: () => ({
        method: "POST",
        path: "/__bench/x402-verify",
        headers: json(),
        body: verifyBody(verifySamples[v++ % verifySamples.length].header, 1),
      }),
    }),
  );
  // CPU per verification: pure computation, so the step's time is its CPU.
  const verifyCpuMs = await perStep(
    "/__bench/x402-verify",
    { header: verifySamples[0].header, amountMinor: 1, payTo: terms.payTo },
    100,
  );
  raw.x402_verify.cpuMsPerVerification = verifyCpuMs;
  log(`  ${verifyCpuMs.toFixed(2)} ms of CPU per verification (median of 5 batches of 100)`);

  // Each settlement takes its own pending charge and an authorization signed to that charge's
  // receiving address (and a margin of one per connection). The charges and their terms are made
  // first: they live in D1, which the chain snapshot below does not touch.
  const inputs = X402_WARMUP + X402_MEASURED + CONNECTIONS;
  log(`  preparing ${inputs} x402 charges and their terms`);
  const x402Charges = await createCharges(B, onchain.apiKey, inputs, CONNECTIONS);
  const x402Terms = await inParallel(x402Charges, CONNECTIONS, termsOf);

  // Settlement: the chain's own floor, then the service, each `X402_WARMUP` settlements of
  // warm-up and `X402_MEASURED` measured ones, both from the same chain state (the floor's
  // settlements, to the same fresh receiving addresses, are reverted before the service runs;
  // see chainSnapshot).
  const revert = await chainSnapshot(service.rpcUrl);
  const chainSigned = await signPayments(x402Terms.slice(0, X402_WARMUP + X402_MEASURED));
  const floorFrom = (await blockNumber(service.rpcUrl)) + 1n;
  floor.chain = await measure("floor_chain_settle", "floor: the chain, same settlement work", "floor", () =>
    chainSettleFloor({
      rpcUrl: service.rpcUrl,
      terms,
      concurrency: CONNECTIONS,
      warmup: X402_WARMUP,
      count: X402_MEASURED,
      signed: chainSigned,
    }),
  );
  if (floor.chain.firstError) log(`  the chain floor's first failure: ${floor.chain.firstError}`);
  // Gas per settlement, one transaction each (read before the floor's blocks are reverted).
  const floorGas = await settlementGas(service.rpcUrl, terms.asset, floorFrom, await blockNumber(service.rpcUrl));
  await revertAfterFloor(revert, raw.floor_chain_settle);
  const settleFrom = (await blockNumber(service.rpcUrl)) + 1n;
  const x402Signed = await signPayments(x402Terms);
  const x402Inputs = x402Charges.map((chargeId, k) => ({ chargeId, header: x402Signed[k].header }));
  let x402Dry = 0;
  const settle = await measure("x402_settle", "x402 settle on the local chain", "scenario", () =>
    load({
      ...base,
      warmupSeconds: 0,
      warmupRequests: X402_WARMUP,
      requests: X402_MEASURED,
      next: () => {
        const input = x402Inputs.pop();
        if (!input) x402Dry++;
        return {
          path: `/charges/${input?.chargeId ?? "chg_x402_ran_dry"}/x402`,
          headers: { "x-payment": input?.header ?? "none" },
        };
      },
      expect: (status) => status === 200,
      afterWarmup: async () => {
        await quiet();
        x402Dry = 0;
      },
    }),
  );
  // The service's, batched when X402_SETTLEMENT_BATCH_ADDRESS is set (npm run dev sets it).
  const settleGas = await settlementGas(service.rpcUrl, terms.asset, settleFrom, await blockNumber(service.rpcUrl));
  raw.x402_settle.gas = { service: settleGas, floor: floorGas };
  if (settle) settle.gas = raw.x402_settle.gas;
  log(
    `  gas per settlement: ${settleGas.gasPerSettlement} (${settleGas.settlements} settlements in ${settleGas.transactions} transactions), ` +
      `one transaction each: ${floorGas.gasPerSettlement}`,
  );
  if (x402Dry > 0) {
    raw.x402_settle.exhausted = true;
    log(`  warning: ${x402Dry} requests found no prepared payment left (counted as errors)`);
  }
  return { verify, verifyCpuMs, settle };
}

/**
 * The service as a merchant's own facilitator: `X402_WARMUP` settlements of $0.001 through
 * `POST /x402/facilitator/settle`, then `X402_MEASURED` measured, against x402 settle's chain floor
 * (the same transfer, the same chain work). It runs after x402 settle, so after that floor's revert:
 * its transfers to the merchant's payTo are never undone under the ledger that credited them.
 */
async function measureFacilitator(run) {
  const { B, base, consoleKey, floor, measure, quiet, raw } = run;
  if (!selected("x402_facilitator_settle") || !floor.chain) return null;
  const merchant = await facilitatorMerchant(B, consoleKey);
  log(
    `  signing ${X402_WARMUP + X402_MEASURED + CONNECTIONS} facilitator settlements of ${FACILITATED_VALUE} base units`,
  );
  const bodies = await settleBodies(merchant.terms, X402_WARMUP + X402_MEASURED + CONNECTIONS);
  let dry = 0;
  const settle = await measure(
    "x402_facilitator_settle",
    "facilitator settle on the local chain",
    "scenario",
    async () => {
      const measured = await facilitatorSettle({
        base,
        rpcUrl: service.rpcUrl,
        merchant,
        bodies,
        warmup: X402_WARMUP,
        count: X402_MEASURED,
        quiet,
      });
      dry = measured.dry;
      return measured.result;
    },
  );
  const gas = settle.gas;
  log(
    `  gas per settlement: ${gas.gasPerSettlement} (${gas.settlements} settlements in ${gas.transactions} transactions)`,
  );
  if (settle.refused > 0)
    log(`  ${settle.refused} settlements answered 200 without success; the first: ${settle.firstRefusal}`);
  if (dry > 0) {
    raw.x402_facilitator_settle.exhausted = true;
    log(`  warning: ${dry} requests found no prepared payment left (counted as errors)`);
  }
  return settle;
}

/**
 * Payouts: `X402_MEASURED` payouts of 1 cent posted `CONNECTIONS` at a time (after `X402_WARMUP` of
 * warm-up by another merchant, waited for until paid), timed until all are paid, against the chain's
 * own floor for the same transfers from the same chain state (see measureX402 and chainSnapshot).
 */
async function measurePayouts(run) {
  if (!selected("payouts_paid")) return null;
  const { B, base, consoleKey, floor, measure, quiet, raw } = run;
  log("  preparing two merchants with $10,000 each and a fresh payout address");
  const [warm, paying] = await inParallel(["bench payouts warm-up", "bench payouts"], 2, (name) =>
    payoutMerchant(B, consoleKey, name, PAYOUT_FUNDS),
  );
  // The token's name, version and address, as any charge's x402 terms state them.
  const [probe] = await createCharges(B, paying.apiKey, 1);
  const [terms] = (await call(B, "GET", `/charges/${probe}/x402`, { expected: [402] })).accepts;
  const signed = await signTransfers({
    from: SETTLEMENT_KEY,
    to: paying.address,
    value: 10_000n, // 1 cent
    count: X402_WARMUP + X402_MEASURED,
    terms,
  });
  let revert = null;
  floor.payoutChain = await measure(
    "floor_chain_payouts",
    "floor: the chain, the payouts' transfers",
    "floor",
    async () => {
      revert = await chainSnapshot(service.rpcUrl);
      return chainSettleFloor({
        rpcUrl: service.rpcUrl,
        terms,
        concurrency: CONNECTIONS,
        warmup: X402_WARMUP,
        count: X402_MEASURED,
        signed,
        // A payout's check asks for the fees every time (checkOutbound).
        feesMaxAgeMs: 0,
      });
    },
  );
  if (floor.payoutChain.firstError) log(`  the chain floor's first failure: ${floor.payoutChain.firstError}`);
  await revertAfterFloor(revert, raw.floor_chain_payouts);

  const payoutsOf = (merchant) => () => ({
    method: "POST",
    path: "/merchant/payouts",
    headers: json({ authorization: `Bearer ${merchant.apiKey}` }),
    body: '{"amountUsdCents":1}',
  });
  const posting = { ...base, meter: undefined, warmupSeconds: 0, expect: (status) => status === 201 };
  const payouts = await measure(
    "payouts_paid",
    "payouts, from the first POST until all are paid",
    "scenario",
    async () => {
      if (X402_WARMUP > 0) {
        await load({ ...posting, requests: X402_WARMUP, next: payoutsOf(warm) });
        const warmed = await untilDecided(B, warm.merchantId, X402_WARMUP);
        if (warmed.timedOut || warmed.failed > 0)
          log(
            `  warning: warm-up payouts ended ${warmed.paid} paid, ${warmed.failed} failed, ${warmed.pending} pending`,
          );
        await quiet();
      }
      const begun = base.meter?.begin();
      const startedAt = Date.now();
      const answered = await load({ ...posting, requests: X402_MEASURED, next: payoutsOf(paying) });
      const decided = await untilDecided(B, paying.merchantId, answered.ok);
      const threads = base.meter && begun ? base.meter.end(begun) : null;
      if (decided.timedOut) log(`  warning: ${decided.pending} payouts still pending after 90 s (counted as errors)`);
      return paidResult(B, paying.merchantId, { sent: X402_MEASURED, startedAt, answered, threads });
    },
  );
  if (payouts) {
    const a = payouts.accepted;
    log(
      `  answered 201 at ${a.okRps.toFixed(0)}/s (p50 ${ms(a.p50)} ms, p99 ${ms(a.p99)} ms, ${a.errors} errors); ` +
        `${payouts.ok} of ${payouts.requests} paid in ${payouts.seconds.toFixed(1)} s (${payouts.statuses.failed} failed, ${payouts.statuses.pending} pending)`,
    );
    raw.payouts_paid.payoutsMerchantId = paying.merchantId;
  }
  return payouts;
}

/** Webhook fan-out: payments offered at a fixed rate, and the delivery of their events to the receiver. */
async function measureWebhooks(run, payRate) {
  if (!selected("webhook_payments")) return null;
  const { B, base, consoleKey, crowd, hooks, measure, quiet, raw } = run;
  // Charges first, and their charge.created events fanned out, so the endpoint sees payment events only.
  const webhookRate = Math.min(WEBHOOK_PAYMENTS_PER_SECOND, payRate * 1.5 + 5);
  const webhookCharges = await createCharges(
    B,
    hooks.apiKey,
    Math.ceil(webhookRate * WEBHOOK_SECONDS) + CONNECTIONS * 2,
    CONNECTIONS,
  );
  await quiet();
  const endpoint = await call(B, "POST", "/settings/webhooks", {
    token: consoleKey,
    body: { url: receiver.url, events: ["payment.succeeded", "charge.succeeded"], merchantId: hooks.merchantId },
  });
  receiver.setSecret(endpoint.secret);
  let wc = 0;
  let hookStarted = Date.now();
  const webhookLoad = await measure(
    "webhook_payments",
    `payments offered at ${WEBHOOK_PAYMENTS_PER_SECOND}/s (${WEBHOOK_EVENTS_PER_SECOND} events/s)`,
    "scenario",
    () => {
      hookStarted = Date.now();
      return load({
        ...base,
        warmupSeconds: 0,
        seconds: WEBHOOK_SECONDS,
        overallRate: WEBHOOK_PAYMENTS_PER_SECOND,
        next: () => ({
          method: "POST",
          path: `/charges/${webhookCharges[wc++] ?? "chg_pool_ran_dry"}/pay`,
          headers: { authorization: `Bearer ${crowd[run.turn++ % crowd.length].apiKey}` },
        }),
      });
    },
  );
  const hookEnded = Date.now();
  const expected = webhookLoad.ok * 2;
  const drainDeadline = Date.now() + 60_000;
  while (receiver.events.size < expected && Date.now() < drainDeadline) await new Promise((r) => setTimeout(r, 200));
  const lags = [...receiver.events.values()].map((e) => e.receivedAt - e.createdAt).sort((a, b) => a - b);
  const pct = (p) => lags[Math.min(lags.length - 1, Math.floor((p / 100) * lags.length))] ?? 0;
  // The delivery rate is taken over the span in which deliveries arrived (first to last), so the
  // lag before the first one does not read as a slower pipeline; the lag has its own columns.
  const arrivals = [...receiver.events.values()].map((e) => e.receivedAt).sort((a, b) => a - b);
  const firstArrival = arrivals[0] ?? hookEnded;
  const lastArrival = arrivals.at(-1) ?? hookEnded;
  const deliveryRate = arrivals.length > 1 ? (arrivals.length - 1) / ((lastArrival - firstArrival) / 1000) : 0;
  const webhooks = {
    requests: receiver.stats.posts,
    ok: receiver.events.size,
    errors: Math.max(0, expected - receiver.events.size) + receiver.stats.badSignatures,
    rps: deliveryRate,
    okRps: deliveryRate,
    offeredEventsPerSecond: expected / ((hookEnded - hookStarted) / 1000),
    p50: pct(50),
    p90: pct(90),
    p99: pct(99),
    max: lags.at(-1) ?? 0,
    mean: lags.reduce((a, b) => a + b, 0) / Math.max(1, lags.length),
    expected,
    delivered: receiver.events.size,
    duplicates: receiver.stats.duplicates,
    badSignatures: receiver.stats.badSignatures,
    drainSeconds: (lastArrival - hookEnded) / 1000,
    threads: webhookLoad.threads,
  };
  raw.webhook_delivery = { name: "webhook delivery (lag)", kind: "scenario", ...webhooks };
  log(
    `  webhooks: ${webhooks.delivered}/${expected} delivered at ${webhooks.okRps.toFixed(0)} events/s (payments made ${webhooks.offeredEventsPerSecond.toFixed(0)}/s), ` +
      `lag p50 ${webhooks.p50} ms, p99 ${webhooks.p99} ms, ` +
      `last one ${webhooks.drainSeconds.toFixed(1)} s after the load`,
  );
  return webhooks;
}

/**
 * The shards group: a service of its own with two ledger shards (its own ports and state), its
 * merchants and agents placed by `spread` and sorted by the directory (`/__bench/shard`), and
 * wallet payments within a shard and across the two, each row alternating with the same floor as
 * the wallet rows (DO RPC + a payment-sized batch, in shard 0's database). Returns the rows'
 * results and their raw figures (the sequencer counts of both shards included).
 */
async function measureShards(guess) {
  log(`shards: starting a second service with ${LEDGER_SHARDS} ledger shards (placement: spread)`);
  service = await startService({
    log,
    vars: { DEV_LEDGER_SHARDS: String(LEDGER_SHARDS), DEV_LEDGER_SHARD_PLACEMENT: "spread" },
  });
  const B = service.url;
  const m = meter(B, { shards: Array.from({ length: LEDGER_SHARDS }, (_, k) => k) });
  const consoleKey = consoleToken(B);
  const homeOf = async (kind, id) => (await call(B, "GET", `/__bench/shard?kind=${kind}&id=${id}`)).shard;

  // One merchant on each shard, and AGENTS agents on each: created until the placement has put enough
  // on both (each owner's shard is random, so about twice as many are made; the rest stay idle).
  log(`  seeding: a merchant and ${AGENTS} agents on each of the ${LEDGER_SHARDS} shards`);
  const merchants = Array(LEDGER_SHARDS).fill(null);
  for (let n = 0; merchants.includes(null); n++) {
    if (n >= 64) throw new Error("64 merchants and still a shard without one: is LEDGER_SHARDS set?");
    const merchant = await createMerchant(B, consoleKey, `bench shards merchant ${n}`);
    merchants[await homeOf("merchant", merchant.merchantId)] ??= merchant;
  }
  const crowds = merchants.map(() => []);
  let made = 0;
  while (crowds.some((c) => c.length < AGENTS)) {
    if (made > AGENTS * LEDGER_SHARDS * 8) throw new Error("the placement keeps missing a shard");
    const missing = Math.max(...crowds.map((c) => AGENTS - c.length));
    const names = Array.from({ length: missing * LEDGER_SHARDS }, () => `bench shards agent ${made++}`);
    const agents = await inParallel(names, 8, async (name) => {
      const agent = await createAgent(B, consoleKey, name, CREDIT);
      return { ...agent, shard: await homeOf("agent", agent.agentId) };
    });
    for (const agent of agents) if (crowds[agent.shard].length < AGENTS) crowds[agent.shard].push(agent);
  }
  log(`  ${made} agents made for ${AGENTS} on each shard`);
  // The directory and the ids agree: a shard-1 merchant's charges carry its shard (`chg_s1_...`).
  const [probe] = await createCharges(B, merchants[1].apiKey, 1);
  if (!probe.includes("_s1_")) throw new Error(`a shard-1 merchant's charge ${probe} does not carry its shard`);

  // The floor's scratch pool is cloned from a charge in shard 0's database (DB), the control database.
  const [template] = await createCharges(B, merchants[0].apiKey, 1);
  const base = {
    url: B,
    connections: CONNECTIONS,
    warmupSeconds: WARMUP,
    seconds: SECONDS,
    meter: threadMeter(service.pgid, service.port),
  };
  // No floor rows here: the guess stands in for the floor's rate when the pending charges are topped up after a warm-up.
  const run = { B, ...m, base, template, floor: { rpcBatch: { okRps: guess } }, turn: 0 };
  await scratchFloor(run);
  // Each row's payments, counted by the merchant's paid charges over the span of the sequencer's counts.
  const paidOf = (merchant) => async () =>
    (await call(B, "GET", `/__bench/paid?merchantId=${merchant.merchantId}`)).paid;
  const scenarioOf = (merchant) =>
    walletScenarios(run, [], (n) => createCharges(B, merchant.apiKey, n, CONNECTIONS), paidOf(merchant));
  const payTo = merchants.map(scenarioOf);
  const roundRobin = (agents) => {
    let k = 0;
    return () => agents[k++ % agents.length];
  };
  // Half of each shard's crowd, interleaved: every other payment crosses.
  const half = AGENTS / 2;
  const mixed = crowds[0].slice(0, half).flatMap((a, k) => [a, crowds[1][k]]);
  const within0 = await payTo[0](
    "shards_within_0",
    "wallet pay, 2 shards, within shard 0",
    roundRobin(crowds[0]),
    guess,
  );
  const within1 = await payTo[1](
    "shards_within_1",
    "wallet pay, 2 shards, within shard 1",
    roundRobin(crowds[1]),
    within0?.okRps ?? guess,
  );
  const across = await payTo[1](
    "shards_across",
    `wallet pay, 2 shards, ${AGENTS} agents, all across shards`,
    roundRobin(crowds[0]),
    within0?.okRps ?? guess,
  );
  const mixedRow = await payTo[1](
    "shards_mixed",
    `wallet pay, 2 shards, ${AGENTS} agents, half across`,
    roundRobin(mixed),
    within0?.okRps ?? guess,
  );
  await dropScratch(run);
  // Correctness at rest: every cross-shard transfer decided (the wallet drives each inline; the alarm
  // and the cron finish any left over), and the transit accounts summing to nothing over the shards.
  let transit = await call(B, "GET", "/__bench/transit");
  const pendingOf = (t) => t.shards.reduce((n, x) => n + x.transfers.pending, 0);
  for (const deadline = Date.now() + 30_000; pendingOf(transit) > 0 && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 500));
    transit = await call(B, "GET", "/__bench/transit");
  }
  const figures = transit.shards.map(
    (x) =>
      `shard ${x.shard}: ${x.transfers.completed} transfers completed, ${x.transfers.reversed} reversed, ${x.transfers.pending} pending, transit accounts ${x.inTransitMinor} cents`,
  );
  // Each shard's transit accounts hold its side of the transfers; over the shards they sum to 0 at rest.
  const inTransit = transit.shards.reduce((n, x) => n + x.inTransitMinor, 0);
  log(`  at rest: ${figures.join("; ")}; over both shards ${inTransit} cents in transit`);
  m.raw.shards_transit = transit;
  return { raw: m.raw, within0, within1, across, mixed: mixedRow, transit };
}

/** The facilitator settle row: against x402 settle's chain floor, bound by the chain as that row is. */
function facilitatorRow(result, chainFloor) {
  const ratio = result && chainFloor?.okRps > 0 ? result.okRps / chainFloor.okRps : null;
  const gas = result?.gas;
  return {
    name: "facilitator settle",
    kind: "scenario",
    result,
    floor: "chain",
    ratio,
    target: "chain-bound (>= 0.8)",
    note: gas
      ? `gas per settlement ${gas.gasPerSettlement} (${gas.settlements} settlements in ${gas.transactions} transactions)`
      : null,
    met: ratio !== null && ratio >= 0.8 && result.errors === 0,
  };
}

/** The table's rows: each result beside its floor, and whether it met its target; and the issue's targets, one line each. */
function tableRows(floor, results, raw, stepsCpu) {
  const {
    statements,
    chargeCreation,
    across,
    hotAgent,
    checkout,
    drawOne,
    drawMany,
    outbound,
    verify,
    verifyCpuMs,
    settle,
    facilitatorSettled,
    payouts,
    webhooks,
    shards,
  } = results;
  const rows = [];
  const ratio = (r, f) => (r && f && f.okRps > 0 ? r.okRps / f.okRps : null);
  const F_RPC_BATCH = "DO RPC + batch";
  // A payment row's ratio is the median over its pairs of windows with this floor (pairs.mjs), with their spread.
  const payTarget = (r, extra, floorName = F_RPC_BATCH) => {
    const x = r?.ratio?.median ?? null;
    return {
      floor: floorName,
      ratio: x,
      spread: r?.ratio ?? null,
      cpuRatio: r?.cpuRatio?.median ?? null,
      cpuSpread: r?.cpuRatio ?? null,
      target: `>= ${PAY_RATIO_TARGET.toFixed(1)}${extra ? `, ${extra}` : ""}`,
      met: x !== null && x >= PAY_RATIO_TARGET,
    };
  };
  // The payment rows of the issue: judged by their CPU against the floor's in the same pairs, the rate printed beside it.
  const cpuPay = (r) => ({ ...payTarget(r), ...cpuTarget(r, PAY_CPU_RATIO_TARGET) });
  // Outbound authorizations: against their own floor (the signature too), with no error at all.
  const outboundT = payTarget(outbound, "0 errors", "sig + DO RPC + batch");
  outboundT.met = outboundT.met && outbound?.errors === 0;
  const settleRatio = ratio(settle, floor.chain);
  const settleCpu = cpuMsPerOk(settle);
  const steps = settleSteps({
    requestCpu: cpuMsPerOk(floor.noop),
    batchCpu: cpuMsPerOk(floor.batch),
    d1ReadCpu: stepsCpu?.d1_read,
    checkBatchCpu: stepsCpu?.rpc_check_batch,
    ledger: raw.x402_settle?.ledger ?? null,
  });
  const settleT = settleNote(settleCpu, steps, settleRatio, {
    stepsLimit: SETTLE_STEPS_RATIO_TARGET,
    chainLimit: SETTLE_CHAIN_RATIO_TARGET,
  });
  if (raw.x402_settle) raw.x402_settle.steps = { ...steps, cpuMs: settleCpu, ratio: settleT.ratio };
  const payoutRatio = ratio(payouts, floor.payoutChain);
  rows.push(
    { name: "floor: trivial route", kind: "floor", result: floor.noop },
    { name: "floor: one DO RPC", kind: "floor", result: floor.rpc },
    { name: `floor: one D1 batch (${statements ?? "?"} statements)`, kind: "floor", result: floor.batch },
    { name: "floor: DO RPC + that batch", kind: "floor", result: floor.rpcBatch },
    {
      name: "  (same, one at a time)",
      kind: "floor",
      result: floor.serial,
      floor: F_RPC_BATCH,
      ratio: ratio(floor.serial, floor.rpcBatch),
    },
    // Measured only in turns with the outbound row: its windows combined (pairs.mjs).
    { name: "floor: signature + DO RPC + batch", kind: "floor", result: outbound?.floor ?? null },
    { name: "floor: chain settlement", kind: "floor", result: floor.chain },
    { name: "floor: chain, payout transfers", kind: "floor", result: floor.payoutChain },
    {
      name: "charge creation",
      kind: "scenario",
      result: chargeCreation,
      floor: "D1 batch",
      ratio: ratio(chargeCreation, floor.batch),
    },
    { name: `wallet pay, ${AGENTS} agents`, kind: "scenario", result: across, ...cpuPay(across), issue: true },
    { name: "wallet pay, one hot agent", kind: "scenario", result: hotAgent, ...cpuPay(hotAgent), issue: true },
    { name: "checkout-link pay", kind: "scenario", result: checkout, ...cpuPay(checkout), issue: true },
    { name: "PayLink draw, one grant", kind: "scenario", result: drawOne, ...cpuPay(drawOne), issue: true },
    { name: `PayLink draw, ${GRANTS} grants`, kind: "scenario", result: drawMany, ...cpuPay(drawMany), issue: true },
    { name: `outbound x402 auth., ${AGENTS} agents`, kind: "scenario", result: outbound, ...outboundT },
    {
      name: "x402 verify",
      kind: "scenario",
      result: verify,
      floor: "trivial route",
      ratio: ratio(verify, floor.noop),
      target: `CPU < 5 ms (${verifyCpuMs?.toFixed(2) ?? "-"} ms)`,
      met: verifyCpuMs !== null && verifyCpuMs < 5 && verify?.errors === 0,
    },
    {
      name: "x402 settle",
      kind: "scenario",
      result: settle,
      floor: "chain",
      ratio: settleRatio,
      // Its CPU over the steps' sum, in the cpu ratio column.
      cpuRatio: settleT.ratio,
      target: `cpu <= ${SETTLE_STEPS_RATIO_TARGET}x steps, >= ${SETTLE_CHAIN_RATIO_TARGET.toFixed(1)} of chain`,
      notes: [
        settle ? settleT.text : null,
        settle?.gas
          ? `gas per settlement ${settle.gas.service.gasPerSettlement} (${settle.gas.service.settlements} settlements in ${settle.gas.service.transactions} transactions); one transaction each: ${settle.gas.floor.gasPerSettlement}`
          : null,
      ],
      // Unknown steps (a figure missing) leave the target unjudged.
      met:
        settleT.ratio === null || settleRatio === null
          ? null
          : settleT.ratio <= SETTLE_STEPS_RATIO_TARGET &&
            settleRatio >= SETTLE_CHAIN_RATIO_TARGET &&
            settle?.errors === 0,
    },
    facilitatorRow(facilitatorSettled, floor.chain),
    {
      // Paid per second, from the first POST to the last paid; p50/p99 from a payout's creation to paid.
      name: "payouts paid",
      kind: "scenario",
      result: payouts,
      floor: "chain, payouts",
      ratio: payoutRatio,
      target: "chain-bound (>= 0.8), all paid",
      met: payoutRatio !== null && payoutRatio >= 0.8 && payouts?.errors === 0,
    },
    { name: "  (answered 201)", kind: "scenario", result: payouts?.accepted ?? null },
    {
      name: "webhooks: events/s, lag",
      kind: "scenario",
      result: webhooks,
      floor: `${WEBHOOK_EVENTS_PER_SECOND}/s offered`,
      ratio: webhooks ? webhooks.okRps / WEBHOOK_EVENTS_PER_SECOND : null,
      target: `${WEBHOOK_EVENTS_PER_SECOND}/s, p99 lag < 2 s`,
      met:
        webhooks !== null &&
        webhooks.okRps >= WEBHOOK_EVENTS_PER_SECOND * 0.95 &&
        webhooks.p99 < 2000 &&
        webhooks.errors === 0,
    },
  );
  const crossing = shardRows(rows, shards, payTarget);
  // Rows BENCH_ONLY left out show "-", neither met nor missed.
  for (const r of rows) if (!r.result) Object.assign(r, { ratio: null, spread: null, cpuRatio: null, met: null });
  // The webhook row's events are delivered after its window too: its thread share says nothing per event.
  for (const r of rows) r.cpuMs = r.name.startsWith("webhooks") ? null : cpuMsPerOk(r.result);
  return { rows, targets: issueTargets(rows, { settle, settleT, settleRatio, payoutRatio, crossing }) };
}

/**
 * The shards group's rows, only in a run that names it (BENCH_ONLY=shards): the default table is
 * unchanged. The all-across row is judged against within shard 1 (the same merchant, the row just
 * before it): statements, D1 batches and CPU per payment. Returns that comparison.
 */
function shardRows(rows, shards, payTarget) {
  if (!ONLY.includes("shards")) return null;
  // A row's rate beside the same shard's payments within it: the ratio of their ratios to the floor.
  const perWithin = (r) => {
    const x = r?.ratio?.median;
    const w = shards?.within1?.ratio?.median;
    return x && w ? `per floor ${(x / w).toFixed(2)} of within shard 1's rate` : null;
  };
  const raw = shards?.raw ?? {};
  const cost = crossingCost(raw.shards_across, raw.shards_within_1, CROSSING_COST_TARGET);
  if (raw.shards_across) raw.shards_across.crossingCost = { ...cost, lines: undefined };
  const mixedCost = crossingCost(raw.shards_mixed, raw.shards_within_1, CROSSING_COST_TARGET);
  rows.push(
    {
      name: "wallet pay, 2 shards, within shard 0",
      kind: "shards",
      result: shards?.within0,
      ...payTarget(shards?.within0),
    },
    {
      name: "wallet pay, 2 shards, within shard 1",
      kind: "shards",
      result: shards?.within1,
      ...payTarget(shards?.within1),
    },
    {
      name: `wallet pay, 2 shards, ${AGENTS} agents, all across`,
      kind: "shards",
      result: shards?.across,
      ...payTarget(shards?.across),
      target: `<= ${CROSSING_COST_TARGET}x within: statements, batches, cpu`,
      met: cost.met,
      notes: [perWithin(shards?.across), ...cost.lines],
    },
    {
      name: `wallet pay, 2 shards, ${AGENTS} agents, half across`,
      kind: "shards",
      result: shards?.mixed,
      ...payTarget(shards?.mixed),
      target: "none (half three phases)",
      met: null,
      notes: [perWithin(shards?.mixed), ...mixedCost.lines],
    },
  );
  return cost;
}

/** One line per target of the issue: the figure it is judged by and whether it is met. */
function issueTargets(rows, { settle, settleT, settleRatio, payoutRatio, crossing }) {
  const r2 = (n) => (n === null || n === undefined ? "-" : n.toFixed(2));
  const lines = rows
    .filter((r) => r.issue)
    .map((r) => ({
      target: `${r.name}: cpu per payment <= ${PAY_CPU_RATIO_TARGET}x its floor's, 0 errors`,
      figure: r.result ? `${r2(r.cpuRatio)}x, ${r.result.errors} errors` : null,
      measured: Boolean(r.result),
      met: r.met,
    }));
  lines.push(
    {
      target: `x402 settle: cpu <= ${SETTLE_STEPS_RATIO_TARGET}x its necessary steps, >= ${SETTLE_CHAIN_RATIO_TARGET.toFixed(1)} of the chain's rate`,
      figure: settle ? `${r2(settleT.ratio)}x, chain ${r2(settleRatio)}, ${settle.errors} errors` : null,
      measured: Boolean(settle),
      met: rows.find((r) => r.name === "x402 settle")?.met ?? null,
    },
    {
      target: "payouts paid: >= 0.8 of the chain's rate, all paid",
      figure: rows.find((r) => r.name === "payouts paid")?.result
        ? `${r2(payoutRatio)}, ${rows.find((r) => r.name === "payouts paid").result.errors} not paid`
        : null,
      measured: Boolean(rows.find((r) => r.name === "payouts paid")?.result),
      met: rows.find((r) => r.name === "payouts paid")?.met ?? null,
    },
    {
      target: `shards: a payment across <= ${CROSSING_COST_TARGET}x one within, in statements, D1 batches and cpu`,
      figure: crossing
        ? `statements ${r2(crossing.ratios.statements)}x, batches ${r2(crossing.ratios.batches)}x, cpu ${r2(crossing.ratios.cpu)}x`
        : null,
      measured: Boolean(crossing?.acrossMeasured),
      met: crossing?.met ?? null,
    },
  );
  return lines;
}

/** Prints the table and writes it, with every row's full result, to bench/results/. */
async function report({ rows, targets }, raw, { statements, steps, stepsCpu, storage }) {
  const text = table(rows);
  console.log(`\n${text}\n`);
  console.log(
    "req/s counts successful responses; for webhooks it is events delivered per second while the payments ran, and p50/p99 are the lag from payment to delivery.",
  );
  console.log(
    "payouts paid counts payouts paid per second from the first POST to the last one paid, and p50/p99 are each payout's time from its creation to paid; the row under it is the 201 answers alone.",
  );
  console.log(
    "thread is how much of the measured window the service's workerd thread (every isolate, Durable Object and the local D1) spent on a CPU: near 100 % the row is bound by that one thread.",
  );
  console.log(
    "cpu ms is that thread's CPU per expected answer in the window (per settlement for x402 settle and facilitator settle, per verification for x402 verify).",
  );
  console.log(
    "cpu ratio is a payment row's cpu ms over its floor's in the same pairs of windows (median, lowest-highest); for x402 settle, its cpu ms over the sum of its necessary steps.",
  );
  if (steps)
    console.log(
      `Step costs, one at a time on an idle service (ms, then ms of the thread's CPU): ${STEPS.map(([step, label]) => `${label} ${steps[step].toFixed(2)}, ${stepsCpu?.[step]?.toFixed(2) ?? "-"}`).join("; ")}.`,
    );
  if (storage)
    console.log(
      `Storage: ${storage.asWrittenBytesPerPayment} bytes of D1 per wallet payment as written, ${storage.steadyBytesPerPayment} once retention runs ` +
        `(held for ARCHIVE_AFTER_DAYS), ${storage.archivedBytesPerPayment} once archived too, for good ` +
        `(target <= ${storage.target}: ${storage.met ? "met" : "MISSED"}; ${storage.payments} payments a round).`,
    );
  if (raw.shards_transit)
    console.log(
      `Two shards at rest: ${raw.shards_transit.shards
        .map(
          (x) =>
            `shard ${x.shard} ${x.transfers.completed} transfers completed, ${x.transfers.reversed} reversed, ${x.transfers.pending} pending, transit accounts ${x.inTransitMinor} cents`,
        )
        .join("; ")}.`,
    );
  console.log(`\nThe issue's targets:\n${targets.map((t) => `  ${summaryLine(t)}`).join("\n")}\n`);
  const file = writeJson({
    startedAt: startedAt.toISOString(),
    seconds: SECONDS,
    warmupSeconds: WARMUP,
    connections: CONNECTIONS,
    machine: await machine(),
    paymentBatchStatements: statements,
    stepMs: steps,
    stepCpuMs: stepsCpu,
    targets: targets.map((t) => ({ ...t, line: summaryLine(t) })),
    table: rows.map((r) => ({
      name: r.name,
      kind: r.kind,
      okRps: r.result?.okRps ?? null,
      p50: r.result?.p50 ?? null,
      p99: r.result?.p99 ?? null,
      errors: r.result?.errors ?? null,
      serviceThreadBusy: r.result?.threads?.service?.busy ?? null,
      serviceCpuMsPerOk: r.cpuMs ?? null,
      floor: r.floor ?? null,
      ratio: r.ratio ?? null,
      // Payment rows: the lowest and highest of the pairs' ratios, and the pairs' p99 ratios likewise.
      ratioMin: r.spread?.min ?? null,
      ratioMax: r.spread?.max ?? null,
      p99Ratio: r.result?.p99Ratio ?? null,
      // Payment rows: the service thread's CPU per answer over the floor's, median and spread over the pairs;
      // x402 settle: its CPU over the sum of its necessary steps (results.x402_settle.steps).
      cpuRatio: r.cpuRatio ?? null,
      cpuRatioMin: r.cpuSpread?.min ?? null,
      cpuRatioMax: r.cpuSpread?.max ?? null,
      floorCpuMsPerOk: r.result?.floor ? cpuMsPerOk(r.result.floor) : null,
      target: r.target ?? null,
      met: r.met ?? null,
      notes: [r.note, ...(r.notes ?? [])].filter(Boolean),
    })),
    results: raw,
    elapsedSeconds: (Date.now() - t0) / 1000,
  });
  log(`results written to ${file}`);
}

/** Every group but the opt-in ones, on the default service (wrangler.toml's settings: one ledger shard). */
async function measureDefault() {
  receiver = await startReceiver();
  service = await startService({ log });
  const B = service.url;
  const m = meter(B);
  // `turn` picks the next agent of the crowd; the scenarios share it, as they share `floor`.
  const run = { B, ...m, ...(await seed(B)), floor: {}, turn: 0 };
  const statements = await measureFloors(run);
  const { steps, stepsCpu } = await measureSteps(run);
  const { chargeCreation, pending } = await measureChargeCreation(run);
  const { across, hotAgent, payGuess } = await measureWalletPayments(run, chargeCreation, pending);
  const checkout = await measureCheckout(run);
  const { drawOne, drawMany } = await measurePaylinks(run);
  const outbound = await measureOutbound(run);
  await dropScratch(run);
  // Payouts before x402 settlement: the tokens x402 leaves on receiving addresses are swept on the
  // cron through the same gas keys, which would send during the payouts' chain floor.
  const payouts = await measurePayouts(run);
  const { verify, verifyCpuMs, settle } = await measureX402(run);
  const facilitatorSettled = await measureFacilitator(run);
  const webhooks = await measureWebhooks(run, across?.okRps ?? payGuess);
  if (selected("storage")) m.raw.storage = await measureStorage({ ...run, receiver, log, payments: STORAGE_PAYMENTS });
  const results = {
    statements,
    chargeCreation,
    across,
    hotAgent,
    checkout,
    drawOne,
    drawMany,
    outbound,
    verify,
    verifyCpuMs,
    settle,
    facilitatorSettled,
    payouts,
    webhooks,
  };
  return { floor: run.floor, raw: m.raw, results, statements, steps, stepsCpu, storage: m.raw.storage };
}

async function main() {
  log(`${SECONDS} s per scenario after a ${WARMUP} s warm-up, ${CONNECTIONS} concurrent requests`);
  const measured = mainSelected
    ? await measureDefault()
    : {
        floor: {},
        raw: {},
        // Every default row null: the table shows "-" for each.
        results: Object.fromEntries(
          [
            "chargeCreation",
            "across",
            "hotAgent",
            "checkout",
            "drawOne",
            "drawMany",
            "outbound",
            "verify",
            "settle",
            "facilitatorSettled",
            "payouts",
            "webhooks",
          ].map((row) => [row, null]),
        ),
        statements: null,
        steps: null,
        stepsCpu: null,
        storage: undefined,
      };
  if (ONLY.includes("shards")) {
    // The default service goes first, so the two never share the machine's cores.
    if (service) await service.stop();
    // Without the default service's rate to go by, a guess on the high side: a row whose pending
    // charges run out counts errors (at 200 a quiet machine's within-shard row ran dry).
    const shards = await measureShards(measured.results.across?.okRps ?? 400);
    Object.assign(measured.raw, shards.raw);
    measured.results.shards = shards;
  }
  const { floor, raw, results, statements, steps, stepsCpu, storage } = measured;
  await report(tableRows(floor, results, raw, stepsCpu), raw, { statements, steps, stepsCpu, storage });
}

async function machine() {
  const os = await import("node:os");
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? null,
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  };
}

try {
  await main();
  await stopAll();
  log("done; the service and the local chain are stopped");
  process.exit(0);
} catch (error) {
  console.error(`[bench] failed: ${error instanceof Error ? error.stack : String(error)}`);
  if (service) console.error(`[bench] last lines of the service log:\n${service.output().slice(-3000)}`);
  await stopAll();
  process.exit(1);
}
