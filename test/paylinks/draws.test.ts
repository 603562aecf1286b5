import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it, onTestFailed } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createMerchant } from "../helpers/factories";
import { SEED, SEED_NOTE } from "../helpers/seed";

const newPaylink = async (merchantKey: string, body: Record<string, unknown>) => {
  const res = await api("POST", "/merchant/paylinks", { token: merchantKey, body });
  expect(res.status).toBe(201);
  return res.body as { paylinkId: string; code: string };
};
const accept = (agentKey: string, code: string) => api("POST", `/pl/${code}/accept`, { token: agentKey });
const draw = (merchantKey: string, code: string, agentId: string, amountUsdCents: number) =>
  api("POST", `/merchant/paylinks/${code}/charge`, { token: merchantKey, body: { agentId, amountUsdCents } });
const grantRow = (grantId: string) =>
  env.DB.prepare("SELECT spent_minor AS spent, uses FROM paylink_grants WHERE id = ?")
    .bind(grantId)
    .first<{ spent: number; uses: number }>();
const outboxOf = (type: string, needle: string) =>
  env.DB.prepare("SELECT merchant_id AS merchantId, data FROM outbox_events WHERE type = ? AND data LIKE ?")
    .bind(type, `%${needle}%`)
    .all<{ merchantId: string; data: string }>();

describe("PayLinks", () => {
  it("POST /merchant/paylinks answers 201 with the PayLink and its acceptUrl", async () => {
    const merchant = await createMerchant();
    const res = await api("POST", "/merchant/paylinks", {
      token: merchant.apiKey,
      body: { budgetUsdCents: 1000, label: "research", perChargeUsdCents: 400, maxUses: 5, expiresInHours: 2 },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      paylinkId: expect.stringMatching(/^pl_/),
      code: expect.any(String),
      business: null,
      label: "research",
      budgetMinor: 1000,
      perChargeMinor: 400,
      maxUses: 5,
      uses: 0,
      remainingMinor: 1000,
      expiresAt: expect.any(String),
      status: "active",
      acceptUrl: `/pl/${res.body.code}/accept`,
    });
    const hours = (Date.parse(res.body.expiresAt) - Date.now()) / 3600_000;
    expect(hours).toBeGreaterThan(1.99);
    expect(hours).toBeLessThan(2.01);
    for (const bad of [{}, { budgetUsdCents: 0 }, { budgetUsdCents: 10, uses: 3 }]) {
      expect((await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: bad })).status).toBe(400);
    }
  });

  it("GET /pl/:code shows the public view with the merchant's name; 404 paylink_not_found", async () => {
    const merchant = await createMerchant({ name: "Budget Shop" });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 900 });
    const view = await api("GET", `/pl/${pl.code}`);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({
      paylinkId: pl.paylinkId,
      code: pl.code,
      business: "Budget Shop",
      budgetMinor: 900,
      uses: 0,
      remainingMinor: 900,
      status: "active",
    });
    expect(view.body).not.toHaveProperty("acceptUrl");
    const missing = await api("GET", "/pl/plc_unknown");
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ error: "paylink_not_found" });
  });

  it("accept is idempotent per (PayLink, agent) and fires paylink.accepted once to the merchant", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent();
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 900 });
    const first = await accept(agent.apiKey, pl.code);
    const second = await accept(agent.apiKey, pl.code);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      grantId: expect.stringMatching(/^plg_/),
      paylink: { paylinkId: pl.paylinkId, remainingMinor: 900 },
    });
    expect(second.body.grantId).toBe(first.body.grantId);
    const events = await outboxOf("paylink.accepted", first.body.grantId);
    expect(events.results).toHaveLength(1);
    expect(events.results[0]!.merchantId).toBe(merchant.merchantId);
    expect(JSON.parse(events.results[0]!.data)).toMatchObject({
      grantId: first.body.grantId,
      paylinkId: pl.paylinkId,
      agentId: agent.agentId,
    });
  });

  it("draws down to exhaustion with every error on the way, and budget.exhausted fires once", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 0 } });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 1000, perChargeUsdCents: 600 });
    const { body: accepted } = await accept(agent.apiKey, pl.code);
    const over = await draw(merchant.apiKey, pl.code, agent.agentId, 700);
    expect(over.status).toBe(402);
    expect(over.body).toEqual({ error: "excede_tope_por_uso" });
    // The approval threshold (0) does not apply to a pre-authorized draw.
    const first = await draw(merchant.apiKey, pl.code, agent.agentId, 600);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      paid: true,
      charge: {
        chargeId: expect.stringMatching(/^chg_/),
        status: "paid",
        method: "paylink",
        reference: expect.stringMatching(/^PAY_/),
      },
      spentMinor: 600,
      remainingMinor: 400,
      exhausted: false,
    });
    const tooMuch = await draw(merchant.apiKey, pl.code, agent.agentId, 401);
    expect(tooMuch.status).toBe(402);
    expect(tooMuch.body).toEqual({ error: "excede_presupuesto_restante_400" });
    const last = await draw(merchant.apiKey, pl.code, agent.agentId, 400);
    expect(last.body).toMatchObject({ spentMinor: 1000, remainingMinor: 0, exhausted: true });
    const after = await draw(merchant.apiKey, pl.code, agent.agentId, 1);
    expect(after.status).toBe(409);
    expect(after.body).toEqual({ error: "paylink_exhausted" });
    const exhausted = await outboxOf("budget.exhausted", pl.paylinkId);
    expect(exhausted.results).toHaveLength(1);
    expect(JSON.parse(exhausted.results[0]!.data)).toMatchObject({ paylinkId: pl.paylinkId, spentMinor: 1000 });
    expect(await grantRow(accepted.grantId)).toEqual({ spent: 1000, uses: 2 });
    expect(await balanceOf(agent.apiKey)).toBe(9000);
    // History stays readable.
    expect((await api("GET", `/charges/${first.body.charge.chargeId}`)).body).toMatchObject({
      status: "paid",
      method: "paylink",
    });
  });

  it("max_uses_alcanzado, paylink_expired, sin_grant_del_agente and another merchant's code", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const stranger = await createAgent({ credit: 10_000 });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 1000, maxUses: 1 });
    await accept(agent.apiKey, pl.code);
    expect((await draw(merchant.apiKey, pl.code, agent.agentId, 10)).status).toBe(200);
    const count = await draw(merchant.apiKey, pl.code, agent.agentId, 10);
    expect(count.status).toBe(409);
    expect(count.body).toEqual({ error: "max_uses_alcanzado" });
    const noGrant = await draw(merchant.apiKey, pl.code, stranger.agentId, 10);
    expect(noGrant.status).toBe(409);
    expect(noGrant.body).toEqual({ error: "sin_grant_del_agente" });
    const foreign = await draw(other.apiKey, pl.code, agent.agentId, 10);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: "paylink_not_found" });
    const expiring = await newPaylink(merchant.apiKey, { budgetUsdCents: 1000, expiresInHours: 1 });
    await accept(agent.apiKey, expiring.code);
    await env.DB.prepare("UPDATE paylinks SET expires_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 1000).toISOString(), expiring.paylinkId)
      .run();
    const expired = await draw(merchant.apiKey, expiring.code, agent.agentId, 10);
    expect(expired.status).toBe(409);
    expect(expired.body).toEqual({ error: "paylink_expired" });
    expect((await accept(stranger.apiKey, expiring.code)).body).toEqual({ error: "paylink_expired" });
    expect((await api("GET", `/pl/${expiring.code}`)).body.status).toBe("expired");
  });

  it("the agent's hard limits and balance apply; a refused draw leaves no charge, no entries, no change to the grant", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 300, policy: { maxPerTransactionUsdCents: 250 } });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 1000 });
    const { body: accepted } = await accept(agent.apiKey, pl.code);
    const capped = await draw(merchant.apiKey, pl.code, agent.agentId, 260);
    expect(capped.status).toBe(402);
    expect(capped.body).toEqual({ error: "excede_tope_por_transaccion" });
    await api("PUT", `/console/agents/${agent.agentId}/policy`, { token: await consoleToken(), body: {} });
    const short = await draw(merchant.apiKey, pl.code, agent.agentId, 301);
    expect(short.status).toBe(402);
    expect(short.body).toEqual({ error: "saldo_insuficiente" });
    expect(await grantRow(accepted.grantId)).toEqual({ spent: 0, uses: 0 });
    const charges = await env.DB.prepare("SELECT COUNT(*) AS n FROM charges WHERE paylink_grant_id = ?")
      .bind(accepted.grantId)
      .first<{ n: number }>();
    expect(charges?.n).toBe(0);
    expect(await balanceOf(agent.apiKey)).toBe(300);
  });

  it("20 parallel draws of random sizes on one grant never pass the budget or the use count", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 100_000 });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 1000, maxUses: 8 });
    const { body: accepted } = await accept(agent.apiKey, pl.code);
    // Drawn from the run's seed: a failure names it, and TEST_SEED draws the same sizes again.
    const sizes = fc.sample(fc.integer({ min: 50, max: 249 }), { numRuns: 20, seed: SEED });
    onTestFailed(() => console.log(`the draws' sizes: ${sizes.join(", ")} (${SEED_NOTE})`));
    const results = await Promise.all(sizes.map((amount) => draw(merchant.apiKey, pl.code, agent.agentId, amount)));
    expect(results.every((r) => r.status < 500)).toBe(true);
    const ok = results.filter((r) => r.status === 200);
    const spent = ok.reduce((sum, r) => sum + (r.body.charge ? sizes[results.indexOf(r)]! : 0), 0);
    const row = (await grantRow(accepted.grantId))!;
    expect(row.spent).toBe(spent);
    expect(row.spent).toBeLessThanOrEqual(1000);
    expect(row.uses).toBe(ok.length);
    expect(row.uses).toBeLessThanOrEqual(8);
    for (const r of ok) expect(r.body.spentMinor + r.body.remainingMinor).toBe(1000);
    const paid = await env.DB.prepare(
      "SELECT COALESCE(SUM(amount_minor), 0) AS total FROM charges WHERE paylink_grant_id = ? AND status = 'paid'",
    )
      .bind(accepted.grantId)
      .first<{ total: number }>();
    expect(paid?.total).toBe(row.spent);
    expect(await balanceOf(agent.apiKey)).toBe(100_000 - row.spent);
  });

  it("parallel draws on two grants of one agent never overdraw the wallet", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const [p1, p2] = [
      await newPaylink(merchant.apiKey, { budgetUsdCents: 5000 }),
      await newPaylink(merchant.apiKey, { budgetUsdCents: 5000 }),
    ];
    await accept(agent.apiKey, p1.code);
    await accept(agent.apiKey, p2.code);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => draw(merchant.apiKey, i % 2 ? p1.code : p2.code, agent.agentId, 150)),
    );
    const ok = results.filter((r) => r.status === 200).length;
    expect(ok).toBe(6); // 6 x 150 = 900 <= 1000 < 7 x 150
    expect(results.filter((r) => r.status === 402).every((r) => r.body.error === "saldo_insuficiente")).toBe(true);
    expect(await balanceOf(agent.apiKey)).toBe(1000 - ok * 150);
    const sum = await env.DB.prepare("SELECT COALESCE(SUM(amount_base_units), 0) AS total FROM ledger_entries").first<{
      total: number;
    }>();
    expect(sum?.total).toBe(0);
  });
});
