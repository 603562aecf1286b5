import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { paymentShapedBatch, SCRATCH_TABLES } from "../../bench/batch";
import type { BenchEnv } from "../../bench/env";
import { BENCH_STEPS } from "../../bench/routes";
import benchWorker from "../../bench/worker";
import type { Env } from "../../src/config/env";
import service from "../../src/index";
import { walletPaymentPlan } from "../../src/ledger/movements";
import { api } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { PRODUCTION_LIKE_RECEIPT_KEY } from "../helpers/receipt-keys";
import { waitFor } from "../helpers/wait";
import { chain, xPaymentHeader } from "../helpers/x402";

// The runtime floors of `npm run bench` (bench/): served by the bench's own Worker (bench/worker.ts,
// bench/wrangler.toml; this file runs in the vitest project of that Worker), never by the service,
// refused with production settings, and writing only to their own scratch tables. No timing is asserted here.

const benchEnv = (vars: Partial<Env> = {}): BenchEnv => ({ ...env, ...vars }) as BenchEnv;

/** One request to a handler with the test env (plus `vars`), as workerd would deliver it. */
async function fetchOf(handler: ExportedHandler<BenchEnv>, path: string, init: RequestInit, vars: Partial<Env> = {}) {
  const ctx = createExecutionContext();
  const response = await handler.fetch!(
    new Request(`http://service.test${path}`, init) as Request<unknown, IncomingRequestCfProperties>,
    benchEnv(vars),
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return response;
}

async function bench(method: string, path: string, body?: unknown, vars: Partial<Env> = {}) {
  const init: RequestInit = {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  };
  const response = await fetchOf(benchWorker, `/__bench/${path}`, init, vars);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const count = async (sql: string) => (await env.DB.prepare(sql).first<{ n: number }>())?.n ?? 0;

describe("bench routes", () => {
  it("are not served by the service itself: its Worker answers 404, so nothing can make scratch tables", async () => {
    const noop = await fetchOf(service, "/__bench/noop", { method: "GET" });
    expect(noop.status).toBe(404);
    const setup = await fetchOf(service, "/__bench/setup", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ templateChargeId: "chg_x", charges: 1 }),
    });
    expect(setup.status).toBe(404);
    expect(await setup.json()).toEqual({ error: "not_found" });
  });

  it("are refused with production settings: the bench Worker fails closed rather than serving a floor", async () => {
    const production = {
      ENVIRONMENT: "production",
      CONSOLE_SESSION_SECRET: "a-real-production-secret-with-enough-entropy-0123456789",
      WEBHOOK_SECRETS_KEY: "another-real-production-secret-with-entropy-0123456789",
      RECEIPT_SIGNING_KEY: PRODUCTION_LIKE_RECEIPT_KEY,
    };
    await expect(bench("GET", "noop", undefined, production)).rejects.toThrow(/never runs in production/);
  });

  it("serve the trivial route and the Durable Object RPC when on, and pass other paths to the app", async () => {
    expect(await bench("GET", "noop")).toEqual({ status: 200, body: { ok: true } });
    expect(await bench("POST", "do-rpc")).toEqual({ status: 200, body: { ok: true } });
    expect((await bench("GET", "no-such-floor")).status).toBe(404);
    const app = await fetchOf(benchWorker, "/no-such-route", { method: "GET" });
    expect(app.status).toBe(404);
    expect(await app.json()).toEqual({ error: "not_found" });
  });

  it("time each step of a payment the number of times asked, and refuse an unknown step or too many", async () => {
    for (const step of BENCH_STEPS) {
      expect(await bench("POST", "step", { step, iterations: 3 }), step).toEqual({
        status: 200,
        body: { ok: true, step, iterations: 3 },
      });
    }
    expect((await bench("POST", "step", { step: "mine_a_block", iterations: 1 })).status).toBe(400);
    expect((await bench("POST", "step", { step: "d1_read", iterations: 1_001 })).status).toBe(400);
    // The chain steps need x402; without it the answer says so rather than timing nothing.
    expect(
      await bench("POST", "step", { step: "rpc_call", iterations: 1 }, { X402_PAY_TO: undefined } as Partial<Env>),
    ).toEqual({
      status: 503,
      body: { error: "x402_not_configured" },
    });
    // Only the signature needs the gas key; one step by default.
    const keyless = { FACILITATOR_PRIVATE_KEY: undefined, X402_FACILITATOR_URL: "http://127.0.0.1:9/" } as Partial<Env>;
    expect(await bench("POST", "step", { step: "rpc_call" }, keyless)).toEqual({
      status: 200,
      body: { ok: true, step: "rpc_call", iterations: 1 },
    });
    expect(await bench("POST", "step", { step: "sign_transaction" }, keyless)).toEqual({
      status: 503,
      body: { error: "facilitator_not_configured" },
    });
    // The outbound authorization's signature needs the settlement key, and says so without it.
    const treasuryless = { SETTLEMENT_PRIVATE_KEY: undefined } as Partial<Env>;
    expect(await bench("POST", "step", { step: "sign_authorization" }, treasuryless)).toEqual({
      status: 503,
      body: { error: "treasury_not_configured" },
    });
    // The chain's check batch checks an authorization from the settlement address: it needs that key too.
    expect(await bench("POST", "step", { step: "rpc_check_batch" }, treasuryless)).toEqual({
      status: 503,
      body: { error: "treasury_not_configured" },
    });
    const floorless = await bench(
      "POST",
      "sign-do-d1-batch",
      { i: 0, agentId: "agt_x", merchantId: "mch_x" },
      treasuryless,
    );
    expect(floorless).toEqual({ status: 503, body: { error: "treasury_not_configured" } });
  });

  it("build a batch of a wallet payment's count and shape that names only scratch tables", () => {
    const batch = paymentShapedBatch(7, "agent_a", "mch_m");
    const plan = walletPaymentPlan({
      charge: {
        id: "chg_x",
        merchantId: "mch_m",
        amountMinor: 1,
        amountBaseUnits: 10_000,
        currency: "USD",
        description: null,
        checkoutLinkId: null,
      },
      agentId: "agent_a",
      method: "ledger",
      reference: "PAY_X",
      paidAt: new Date().toISOString(),
    });
    expect(batch).toHaveLength(plan.statements.length + plan.audit.length);
    const tables = batch.flatMap((s) =>
      [...s.sql.matchAll(/\b(?:INTO|UPDATE|FROM|JOIN)\s+[`"]?(\w+)/gi)].map((m) => m[1]!),
    );
    expect(tables.length).toBeGreaterThan(batch.length);
    for (const table of tables)
      expect(table === "batch_guards" || SCRATCH_TABLES.some((t) => table === `bench_${t}`), table).toBe(true);
  });

  it("write payment-sized batches into scratch copies only, with the payment's guards, and drop them after", async () => {
    const merchant = await createMerchant({ name: "floor merchant" });
    const agent = await createAgent({ name: "floor agent", credit: 1000 });
    // An agent without money in this database (with shards: homed elsewhere) would fail the balance guard.
    const broke = await createAgent({ name: "floor agent without money" });
    const template = await createCharge(merchant.apiKey, 500);
    const real = ["charges", "ledger_entries", "audit_events", "outbox_events"];
    const before = await Promise.all(real.map((t) => count(`SELECT COUNT(*) AS n FROM ${t}`)));

    const setup = await bench("POST", "setup", { templateChargeId: template.chargeId, charges: 5 });
    expect(setup.status).toBe(200);
    expect(setup.body).toMatchObject({ merchantId: merchant.merchantId, pool: 5 });
    expect(setup.body.agentIds).toContain(agent.agentId);
    expect(setup.body.agentIds).not.toContain(broke.agentId);

    const floor = (i: number) => ({ i, agentId: agent.agentId, merchantId: merchant.merchantId });
    const statements =
      walletPaymentPlan({
        charge: {
          id: "c",
          merchantId: "m",
          amountMinor: 1,
          amountBaseUnits: 10_000,
          currency: "USD",
          description: null,
          checkoutLinkId: null,
        },
        agentId: "a",
        method: "ledger",
        reference: "r",
        paidAt: "t",
      }).statements.length + 1;
    expect(await bench("POST", "d1-batch", floor(0))).toEqual({ status: 200, body: { ok: true, statements } });
    expect(await bench("POST", "do-d1-batch", floor(1))).toEqual({ status: 200, body: { ok: true, statements } });
    expect(await bench("POST", "do-d1-batch-serial", floor(2))).toEqual({
      status: 200,
      body: { ok: true, statements },
    });
    // An outbound authorization's floor: the settlement key's signature, then the same RPC and batch.
    expect(await bench("POST", "sign-do-d1-batch", floor(3))).toEqual({ status: 200, body: { ok: true, statements } });
    // The payment's own guard, on the copy: a charge is paid once.
    await expect(bench("POST", "d1-batch", floor(0))).rejects.toThrow(/charge_not_pending/);

    expect(await count("SELECT COUNT(*) AS n FROM bench_charges WHERE status = 'paid'")).toBe(4);
    expect(await count("SELECT COUNT(*) AS n FROM bench_ledger_entries")).toBe(8);
    expect(await count("SELECT COUNT(*) AS n FROM bench_audit_events")).toBe(4);
    expect(await count(`SELECT balance_minor AS n FROM bench_agents WHERE id = '${agent.agentId}'`)).toBe(1000 - 4);
    // The real tables and the real wallet are untouched.
    expect(await Promise.all(real.map((t) => count(`SELECT COUNT(*) AS n FROM ${t}`)))).toEqual(before);
    expect(await count(`SELECT balance_minor AS n FROM agents WHERE id = '${agent.agentId}'`)).toBe(1000);
    expect(await count("SELECT COUNT(*) AS n FROM batch_guards")).toBe(0);

    expect(await bench("POST", "teardown")).toEqual({ status: 200, body: { ok: true } });
    expect(await count("SELECT COUNT(*) AS n FROM sqlite_master WHERE name LIKE 'bench\\_%' ESCAPE '\\'")).toBe(0);
  });

  it("verify an x402 payment offline as many times as asked, and say why a wrong one fails", async () => {
    const payTo = chain().payTo;
    const good = await xPaymentHeader(1, 10_000n, { to: payTo });
    expect(await bench("POST", "x402-verify", { header: good.header, amountMinor: 1, payTo, iterations: 3 })).toEqual({
      status: 200,
      body: { valid: true, reason: null, iterations: 3 },
    });
    const short = await bench("POST", "x402-verify", { header: good.header, amountMinor: 2, payTo });
    expect(short).toEqual({
      status: 422,
      body: { valid: false, reason: "invalid_exact_evm_payload_authorization_value", iterations: 1 },
    });
    expect((await bench("POST", "x402-verify", { header: good.header })).status).toBe(400);
  });

  it("report the ledger sequencer's plans and D1 batches, which a payment moves on", async () => {
    const before = await bench("GET", "ledger");
    expect(before.status).toBe(200);
    const merchant = await createMerchant({ name: "ledger stats merchant" });
    const agent = await createAgent({ name: "ledger stats agent", credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 100);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    const after = await bench("GET", "ledger");
    // The credit and the payment at least; other tests' commits may land in between.
    expect(Number(after.body.plans) - Number(before.body.plans)).toBeGreaterThanOrEqual(2);
    expect(Number(after.body.batches)).toBeGreaterThan(Number(before.body.batches));
    // The same start of the object, which is how the runner knows the difference means something.
    expect(after.body.started).toEqual(expect.any(String));
    expect(after.body.started).toBe(before.body.started);
  });

  it("count a merchant's paid charges, which a payment moves on, and refuse a request naming none", async () => {
    const merchant = await createMerchant({ name: "paid count merchant" });
    const agent = await createAgent({ name: "paid count agent", credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 100);
    await createCharge(merchant.apiKey, 100);
    expect(await bench("GET", `paid?merchantId=${merchant.merchantId}`)).toEqual({
      status: 200,
      body: { merchantId: merchant.merchantId, paid: 0 },
    });
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    expect(await bench("GET", `paid?merchantId=${merchant.merchantId}`)).toEqual({
      status: 200,
      body: { merchantId: merchant.merchantId, paid: 1 },
    });
    expect((await bench("GET", "paid")).status).toBe(400);
  });

  it("report a shard's sequencer when asked for one this deployment runs, and refuse any other", async () => {
    // This project runs one shard: shard 0 is the default's answer, shard 1 is refused until LEDGER_SHARDS says 2.
    const zero = await bench("GET", "ledger?shard=0");
    expect(zero.status).toBe(200);
    expect(zero.body.shard === null || zero.body.shard === 0).toBe(true);
    expect((await bench("GET", "ledger?shard=1")).status).toBe(400);
    expect((await bench("GET", "ledger?shard=x")).status).toBe(400);
    const one = await bench("GET", "ledger?shard=1", undefined, { LEDGER_SHARDS: "2" });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ plans: expect.any(Number), batches: expect.any(Number) });
  });

  it("name an owner's home shard from the directory, and answer 404 for an owner it does not know", async () => {
    const merchant = await createMerchant({ name: "shard lookup merchant" });
    const agent = await createAgent({ name: "shard lookup agent" });
    expect(await bench("GET", `shard?kind=merchant&id=${merchant.merchantId}`)).toEqual({
      status: 200,
      body: { kind: "merchant", id: merchant.merchantId, shard: 0 },
    });
    expect((await bench("GET", `shard?kind=agent&id=${agent.agentId}`)).body.shard).toBe(0);
    expect((await bench("GET", "shard?kind=agent&id=agt_nobody")).status).toBe(404);
    expect((await bench("GET", `shard?kind=charge&id=${agent.agentId}`)).status).toBe(400);
  });

  it("report each shard's transit accounts and its cross-shard transfers by status", async () => {
    const transit = await bench("GET", "transit");
    expect(transit).toEqual({
      status: 200,
      body: { shards: [{ shard: 0, inTransitMinor: 0, transfers: { pending: 0, completed: 0, reversed: 0 } }] },
    });
  });

  it("count a merchant's payouts by status, and say when each decided one was created and paid", async () => {
    const merchant = await createMerchant({ name: "payouts count merchant" });
    const agent = await createAgent({ name: "payouts count agent", credit: 500 });
    const charge = await createCharge(merchant.apiKey, 500);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    const address = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } })).status).toBe(
      200,
    );
    const path = `payouts?merchantId=${merchant.merchantId}`;
    expect(await bench("GET", path)).toEqual({ status: 200, body: { pending: 0, paid: 0, failed: 0 } });

    const created = await api("POST", "/merchant/payouts", { token: merchant.apiKey, body: { amountUsdCents: 200 } });
    expect(created.status).toBe(201);
    const counted = await bench("GET", path);
    expect(Number(counted.body.pending) + Number(counted.body.paid)).toBe(1);
    const done = await waitFor(
      "payout paid",
      () => bench("GET", path),
      (r) => r.body.paid === 1,
    );
    expect(done.body).toEqual({ pending: 0, paid: 1, failed: 0 });
    const { body: payout } = await api("GET", `/merchant/payouts/${created.body.payout.payoutId}`, {
      token: merchant.apiKey,
    });
    expect(await bench("GET", `${path}&times=1`)).toEqual({
      status: 200,
      body: {
        pending: 0,
        paid: 1,
        failed: 0,
        decided: [{ status: "paid", createdAt: payout.payout.createdAt, decidedAt: payout.payout.paidAt }],
      },
    });
    // Another merchant's payouts are not counted, and the merchant must be named.
    expect((await bench("GET", "payouts?merchantId=mch_nobody")).body).toEqual({ pending: 0, paid: 0, failed: 0 });
    expect(await bench("GET", "payouts")).toEqual({ status: 400, body: { error: "invalid_request" } });
  });

  it("report the service's queued work", async () => {
    const backlog = await bench("GET", "backlog");
    expect(backlog.status).toBe(200);
    expect(backlog.body).toEqual({ outbox: expect.any(Number), deliveries: expect.any(Number) });
  });
});
