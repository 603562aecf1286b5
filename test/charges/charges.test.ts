import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** Outbox rows of one type for one charge, data parsed. */
async function outboxFor(type: string, chargeId: string) {
  const { results } = await env.DB.prepare(
    "SELECT id, type, merchant_id AS merchantId, data FROM outbox_events WHERE type = ? AND json_extract(data, '$.chargeId') = ?",
  )
    .bind(type, chargeId)
    .all<{ id: string; type: string; merchantId: string | null; data: string }>();
  return results.map((r) => ({ ...r, data: JSON.parse(r.data) as Record<string, unknown> }));
}

describe("POST /merchant/charges", () => {
  it("creates a pending charge with the spec's exact shape", async () => {
    const merchant = await createMerchant({ name: "Shape Co" });
    const before = Date.now();
    const res = await api("POST", "/merchant/charges", {
      token: merchant.apiKey,
      body: { amountUsdCents: 2599, description: "GPU minutes", externalId: "order-77" },
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(
      [
        "agentId",
        "amountMinor",
        // Every charge states its exact amount in base units beside its cents.
        "amountBaseUnits",
        "chargeId",
        "createdAt",
        "currency",
        "description",
        "externalId",
        "merchantId",
        "method",
        "paidAt",
        "reference",
        "refundedMinor",
        // And the exact sum of its refunds beside their whole cents.
        "refundedBaseUnits",
        "status",
      ].sort(),
    );
    expect(res.body.amountBaseUnits).toBe("25990000");
    expect(res.body).toMatchObject({
      refundedMinor: 0,
      merchantId: merchant.merchantId,
      agentId: null,
      amountMinor: 2599,
      currency: "USD",
      description: "GPU minutes",
      externalId: "order-77",
      status: "pending",
      method: null,
      reference: null,
      paidAt: null,
    });
    expect(res.body.chargeId).toMatch(/^chg_[0-9a-z]+$/);
    expect(res.body.createdAt).toMatch(ISO);
    expect(Date.parse(res.body.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(res.body.createdAt)).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it("description and externalId default to null", async () => {
    const merchant = await createMerchant();
    const res = await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 1 } });
    expect(res.status).toBe(201);
    expect(res.body.description).toBeNull();
    expect(res.body.externalId).toBeNull();
    expect(res.body.amountMinor).toBe(1);
  });

  it("writes a charge.created outbox event with chargeId, amountMinor and merchantName", async () => {
    const merchant = await createMerchant({ name: "Outbox Merchant" });
    const charge = await createCharge(merchant.apiKey, 4321);
    const rows = await outboxFor("charge.created", charge.chargeId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.merchantId).toBe(merchant.merchantId);
    expect(rows[0]!.data).toMatchObject({
      chargeId: charge.chargeId,
      amountMinor: 4321,
      merchantName: "Outbox Merchant",
    });
    expect(rows[0]!.id).toMatch(/^evt_wh_/);
  });

  it.each([
    ["zero amount", { amountUsdCents: 0 }],
    ["negative amount", { amountUsdCents: -100 }],
    ["fractional amount", { amountUsdCents: 1.5 }],
    ["amount as a string", { amountUsdCents: "100" }],
    ["missing amount", { description: "no amount" }],
    ["unknown field", { amountUsdCents: 100, tip: 5 }],
  ])("rejects %s with 400 invalid_request and creates nothing", async (_label, body) => {
    const merchant = await createMerchant();
    const res = await api("POST", "/merchant/charges", { token: merchant.apiKey, body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    expect(Array.isArray(res.body.issues)).toBe(true);
    expect(res.body.issues.length).toBeGreaterThan(0);
    const list = await api("GET", "/merchant/charges", { token: merchant.apiKey });
    expect(list.body.charges).toEqual([]);
  });

  it("requires a merchant key", async () => {
    const res = await api("POST", "/merchant/charges", { body: { amountUsdCents: 100 } });
    expect(res.status).toBe(401);
    expect(typeof res.body.error).toBe("string");
  });
});

describe("GET /charges/:chargeId", () => {
  it("is public and returns the charge object", async () => {
    const merchant = await createMerchant();
    const created = await api("POST", "/merchant/charges", {
      token: merchant.apiKey,
      body: { amountUsdCents: 700, description: "d", externalId: "e" },
    });
    const res = await api("GET", `/charges/${created.body.chargeId}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created.body);
  });

  it("404 for an unknown charge", async () => {
    const res = await api("GET", "/charges/chg_doesnotexist000000000000");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: "charge_not_found" });
  });
});

describe("GET /merchant/charges", () => {
  it("returns the last 100, newest first", async () => {
    const merchant = await createMerchant();
    const ids: string[] = [];
    for (let i = 0; i < 102; i++)
      ids.push((await createCharge(merchant.apiKey, 100 + i, { externalId: `n${i}` })).chargeId);
    const res = await api("GET", "/merchant/charges", { token: merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.charges).toHaveLength(100);
    const expected = ids.slice(2).reverse();
    expect(res.body.charges.map((c: { chargeId: string }) => c.chargeId)).toEqual(expected);
    // createdAt is non-increasing down the list.
    const times = res.body.charges.map((c: { createdAt: string }) => c.createdAt);
    expect([...times].sort().reverse()).toEqual(times);
    expect(res.body.charges[0].amountMinor).toBe(201);
    expect(res.body.charges[99].amountMinor).toBe(102);
  });

  it("lists only the calling merchant's charges", async () => {
    const a = await createMerchant({ name: "A" });
    const b = await createMerchant({ name: "B" });
    const a1 = await createCharge(a.apiKey, 111);
    const b1 = await createCharge(b.apiKey, 222);
    const a2 = await createCharge(a.apiKey, 333);
    const listA = await api("GET", "/merchant/charges", { token: a.apiKey });
    const listB = await api("GET", "/merchant/charges", { token: b.apiKey });
    expect(listA.body.charges.map((c: { chargeId: string }) => c.chargeId)).toEqual([a2.chargeId, a1.chargeId]);
    expect(listB.body.charges.map((c: { chargeId: string }) => c.chargeId)).toEqual([b1.chargeId]);
    for (const c of listA.body.charges) expect(c.merchantId).toBe(a.merchantId);
  });
});

describe("POST /charges/:chargeId/pay", () => {
  it("200 paid: charge paid by ledger, balances moved, payment and charge events in the outbox", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const charge = await createCharge(merchant.apiKey, 2500, { description: "report" });
    const res = await payCharge(agent.apiKey, charge.chargeId);
    expect(res.status).toBe(200);
    expect(res.body.paid).toBe(true);
    expect(res.body.merchantBalanceMinor).toBe(2500);
    const paid = res.body.charge;
    expect(paid).toMatchObject({
      chargeId: charge.chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 2500,
      currency: "USD",
      description: "report",
      status: "paid",
      method: "ledger",
    });
    expect(paid.reference).toMatch(/^PAY_[0-9A-Z]+$/);
    expect(paid.paidAt).toMatch(ISO);

    expect(await balanceOf(agent.apiKey)).toBe(7500);
    expect(await merchantBalance(merchant.apiKey)).toBe(2500);

    const pub = await api("GET", `/charges/${charge.chargeId}`);
    expect(pub.body).toEqual(paid);

    const expectedData = {
      chargeId: charge.chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 2500,
      currency: "USD",
      method: "ledger",
      reference: paid.reference,
    };
    for (const type of ["payment.succeeded", "charge.succeeded"]) {
      const rows = await outboxFor(type, charge.chargeId);
      expect(rows, type).toHaveLength(1);
      expect(rows[0]!.merchantId).toBe(merchant.merchantId);
      expect(rows[0]!.data).toMatchObject(expectedData);
    }
  });

  it("merchantBalanceMinor accumulates across payments", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const c1 = await createCharge(merchant.apiKey, 300);
    const c2 = await createCharge(merchant.apiKey, 200);
    expect((await payCharge(agent.apiKey, c1.chargeId)).body.merchantBalanceMinor).toBe(300);
    expect((await payCharge(agent.apiKey, c2.chargeId)).body.merchantBalanceMinor).toBe(500);
    expect(await balanceOf(agent.apiKey)).toBe(500);
  });

  it("402 approval hold: nothing is charged and the charge stays pending", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1000 } });
    const charge = await createCharge(merchant.apiKey, 1500);
    const res = await payCharge(agent.apiKey, charge.chargeId);
    expect(res.status).toBe(402);
    expect(res.body.pendingApproval).toBe(true);
    expect(res.body.reason).toBe("requiere_aprobacion_humana");
    expect(res.body.approvalId).toMatch(/^apr_/);
    expect(res.body.expiresAt).toMatch(ISO);
    const ttl = Date.parse(res.body.expiresAt) - Date.now();
    expect(ttl).toBeGreaterThan(23.9 * 3600_000);
    expect(ttl).toBeLessThanOrEqual(24 * 3600_000);
    expect(res.body.charge).toMatchObject({
      chargeId: charge.chargeId,
      status: "pending",
      agentId: null,
      method: null,
      reference: null,
      paidAt: null,
    });
    expect(res.body.error).toBeUndefined();

    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
    expect(await outboxFor("payment.succeeded", charge.chargeId)).toHaveLength(0);
    expect(await outboxFor("charge.succeeded", charge.chargeId)).toHaveLength(0);
  });

  describe("402 policy refusals leave money and charge untouched", () => {
    async function expectRefused(agentKey: string, merchantKey: string, chargeId: string, error: string) {
      const agentBefore = await balanceOf(agentKey);
      const merchantBefore = await merchantBalance(merchantKey);
      const res = await payCharge(agentKey, chargeId);
      expect(res.status).toBe(402);
      expect(res.body).toEqual({ error });
      expect(await balanceOf(agentKey)).toBe(agentBefore);
      expect(await merchantBalance(merchantKey)).toBe(merchantBefore);
      const pub = await api("GET", `/charges/${chargeId}`);
      expect(pub.body).toMatchObject({ status: "pending", agentId: null, method: null, reference: null, paidAt: null });
      expect(await outboxFor("payment.succeeded", chargeId)).toHaveLength(0);
    }

    it("excede_tope_por_transaccion", async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 10_000, policy: { maxPerTransactionUsdCents: 500 } });
      const charge = await createCharge(merchant.apiKey, 501);
      await expectRefused(agent.apiKey, merchant.apiKey, charge.chargeId, "excede_tope_por_transaccion");
    });

    it("categoria_no_permitida", async () => {
      const merchant = await createMerchant({ category: "gambling" });
      const agent = await createAgent({ credit: 10_000, policy: { allowedCategories: ["data"] } });
      const charge = await createCharge(merchant.apiKey, 100);
      await expectRefused(agent.apiKey, merchant.apiKey, charge.chargeId, "categoria_no_permitida");
    });

    it("excede_limite_diario", async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 10_000, policy: { dailyLimitUsdCents: 1000 } });
      const first = await createCharge(merchant.apiKey, 800);
      expect((await payCharge(agent.apiKey, first.chargeId)).status).toBe(200);
      const second = await createCharge(merchant.apiKey, 201);
      await expectRefused(agent.apiKey, merchant.apiKey, second.chargeId, "excede_limite_diario");
    });

    it("saldo_insuficiente", async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 999 });
      const charge = await createCharge(merchant.apiKey, 1000);
      await expectRefused(agent.apiKey, merchant.apiKey, charge.chargeId, "saldo_insuficiente");
    });

    it("saldo_insuficiente for an agent with no balance at all", async () => {
      const merchant = await createMerchant();
      const agent = await createAgent();
      const charge = await createCharge(merchant.apiKey, 1);
      await expectRefused(agent.apiKey, merchant.apiKey, charge.chargeId, "saldo_insuficiente");
    });
  });

  it("401 without a key or with an invalid agent key; 403 with a merchant key", async () => {
    const merchant = await createMerchant();
    const charge = await createCharge(merchant.apiKey, 100);
    const none = await api("POST", `/charges/${charge.chargeId}/pay`);
    expect(none.status).toBe(401);
    expect(none.body.error).toBe("agent_api_key_required");
    const bogus = await payCharge("svc_sk_not-a-real-key", charge.chargeId);
    expect(bogus.status).toBe(401);
    expect(bogus.body.error).toBe("agent_api_key_required");
    const wrongKind = await payCharge(merchant.apiKey, charge.chargeId);
    expect(wrongKind.status).toBe(403);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
  });

  it("409 charge_not_pending when already paid, for the payer and for another agent", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const other = await createAgent({ credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 400);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    const again = await payCharge(agent.apiKey, charge.chargeId);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: "charge_not_pending" });
    const byOther = await payCharge(other.apiKey, charge.chargeId);
    expect(byOther.status).toBe(409);
    expect(byOther.body).toEqual({ error: "charge_not_pending" });
    expect(await balanceOf(agent.apiKey)).toBe(600);
    expect(await balanceOf(other.apiKey)).toBe(1000);
    expect(await merchantBalance(merchant.apiKey)).toBe(400);
    expect(await outboxFor("payment.succeeded", charge.chargeId)).toHaveLength(1);
  });

  it("404 charge_not_found for an unknown charge", async () => {
    const agent = await createAgent({ credit: 1000 });
    const res = await payCharge(agent.apiKey, "chg_doesnotexist000000000000");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: "charge_not_found" });
    expect(await balanceOf(agent.apiKey)).toBe(1000);
  });
});
