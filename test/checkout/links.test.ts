import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createMerchant, merchantBalance } from "../helpers/factories";

const createLink = async (
  merchantKey: string,
  body: Record<string, unknown> = { amountUsdCents: 700, description: "one report" },
) => api("POST", "/merchant/checkout", { token: merchantKey, body });

const countsOf = async (linkId: string) =>
  (await env.DB.prepare(
    "SELECT COUNT(*) AS n, COALESCE(SUM(amount_minor), 0) AS total FROM charges WHERE checkout_link_id = ? AND status = 'paid'",
  )
    .bind(linkId)
    .first<{ n: number; total: number }>())!;

describe("checkout links", () => {
  it("POST /merchant/checkout answers 201 with the link and zero counters", async () => {
    const merchant = await createMerchant();
    const res = await createLink(merchant.apiKey, {
      amountUsdCents: 700,
      description: "one report",
      externalId: "sku-9",
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      checkoutLinkId: expect.stringMatching(/^cl_/),
      checkoutToken: expect.any(String),
      checkoutUrl: `/checkout/${res.body.checkoutToken}`,
      amountMinor: 700,
      currency: "USD",
      description: "one report",
      visits: 0,
      paymentsCount: 0,
      totalPaidMinor: 0,
    });
  });

  it.each([
    ["no description", { amountUsdCents: 100 }],
    ["amount 0", { amountUsdCents: 0, description: "x" }],
    ["a fractional amount", { amountUsdCents: 1.5, description: "x" }],
    ["an unknown field", { amountUsdCents: 100, description: "x", active: false }],
  ])("400 invalid_request for %s", async (_name, body) => {
    const merchant = await createMerchant();
    const res = await createLink(merchant.apiKey, body);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });

  it("GET /merchant/checkout-links lists only the merchant's links, with limit (default 20, max 100) and total", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    for (let i = 0; i < 3; i++) await createLink(merchant.apiKey);
    await createLink(other.apiKey);
    const res = await api("GET", "/merchant/checkout-links?limit=2", { token: merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(3);
    expect(res.body.links).toHaveLength(2);
    expect(Object.keys(res.body.links[0]).sort()).toEqual([
      "active",
      "amountMinor",
      "checkoutLinkId",
      "checkoutToken",
      "checkoutUrl",
      "createdAt",
      "currency",
      "description",
      "paymentsCount",
      "totalPaidMinor",
      "visits",
    ]);
    expect((await api("GET", "/merchant/checkout-links", { token: merchant.apiKey })).body.links).toHaveLength(3);
    expect((await api("GET", "/merchant/checkout-links?limit=101", { token: merchant.apiKey })).status).toBe(400);
  });

  it("the public view counts every visit and names the merchant", async () => {
    const merchant = await createMerchant({ name: "Visible Shop" });
    const link = (await createLink(merchant.apiKey)).body;
    await api("GET", `/checkout/${link.checkoutToken}`);
    const view = await api("GET", `/checkout/${link.checkoutToken}`);
    expect(view.status).toBe(200);
    expect(view.body).toEqual({
      checkoutLinkId: link.checkoutLinkId,
      amountMinor: 700,
      currency: "USD",
      description: "one report",
      merchantName: "Visible Shop",
      active: true,
      status: "active",
      visits: 2,
      paymentsCount: 0,
      totalPaidMinor: 0,
    });
    expect((await api("GET", "/checkout/ct_unknown")).status).toBe(404);
  });

  it("each agent's payment is its own paid charge; the counters match the charges", async () => {
    const merchant = await createMerchant();
    const [a, b] = [await createAgent({ credit: 5000 }), await createAgent({ credit: 5000 })];
    const link = (await createLink(merchant.apiKey)).body;
    const pa = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: a.apiKey });
    const pb = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: b.apiKey });
    expect(pa.status).toBe(200);
    expect(pa.body).toEqual({
      paid: true,
      charge: expect.objectContaining({ status: "paid", method: "ledger", reference: expect.stringMatching(/^PAY_/) }),
    });
    expect(pa.body).not.toHaveProperty("merchantBalanceMinor");
    expect(pb.body.charge.chargeId).not.toBe(pa.body.charge.chargeId);
    const charges = (await api("GET", "/merchant/charges", { token: merchant.apiKey })).body.charges;
    expect(charges.map((c: { chargeId: string }) => c.chargeId).sort()).toEqual(
      [pa.body.charge.chargeId, pb.body.charge.chargeId].sort(),
    );
    const view = (await api("GET", `/checkout/${link.checkoutToken}`)).body;
    expect(view).toMatchObject({ paymentsCount: 2, totalPaidMinor: 1400 });
    expect(await countsOf(link.checkoutLinkId)).toEqual({ n: 2, total: 1400 });
    expect(await merchantBalance(merchant.apiKey)).toBe(1400);
  });

  it("over the approval threshold: 402 pendingApproval; granting it pays the charge and moves the counters", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000, policy: { approvalThresholdUsdCents: 500 } });
    const link = (await createLink(merchant.apiKey)).body;
    const held = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    expect(held.status).toBe(402);
    expect(held.body).toMatchObject({
      pendingApproval: true,
      reason: "requiere_aprobacion_humana",
      approvalId: expect.stringMatching(/^apr_/),
    });
    expect((await api("GET", `/checkout/${link.checkoutToken}`)).body).toMatchObject({
      paymentsCount: 0,
      totalPaidMinor: 0,
    });
    const granted = await api("POST", `/approvals/${held.body.approvalId}/grant`, { token: await consoleToken() });
    expect(granted.status).toBe(200);
    expect((await api("GET", `/checkout/${link.checkoutToken}`)).body).toMatchObject({
      paymentsCount: 1,
      totalPaidMinor: 700,
    });
    expect(await balanceOf(agent.apiKey)).toBe(4300);
  });

  it("a refused payment leaves no charge behind", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 100 });
    const link = (await createLink(merchant.apiKey)).body;
    const refused = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    expect(refused.status).toBe(402);
    expect(refused.body).toEqual({ error: "saldo_insuficiente" });
    expect((await api("GET", "/merchant/charges", { token: merchant.apiKey })).body.charges).toHaveLength(0);
  });

  it("disabled: 409 and no charge; enabled again: paid, history and counters kept", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000 });
    const link = (await createLink(merchant.apiKey)).body;
    await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    const off = await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
      token: merchant.apiKey,
      body: { active: false },
    });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({
      checkoutLinkId: link.checkoutLinkId,
      active: false,
      paymentsCount: 1,
      totalPaidMinor: 700,
      createdAt: expect.any(String),
    });
    const refused = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: "checkout_link_disabled" });
    // The public view of a disabled link is the checkout error 409 (its status would be a value the contract never shows); the visit counts.
    const visits = async () =>
      (await env.DB.prepare("SELECT visits FROM checkout_links WHERE id = ?")
        .bind(link.checkoutLinkId)
        .first<{ visits: number }>())!.visits;
    const visitsBefore = await visits();
    const view = await api("GET", `/checkout/${link.checkoutToken}`);
    expect(view.status).toBe(409);
    expect(view.body).toEqual({ error: "checkout_link_disabled" });
    expect(await visits()).toBe(visitsBefore + 1);
    const on = await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
      token: merchant.apiKey,
      body: { active: true },
    });
    expect(on.body.active).toBe(true);
    expect((await api("GET", `/checkout/${link.checkoutToken}`)).body).toMatchObject({
      active: true,
      status: "active",
      paymentsCount: 1,
    });
    expect((await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey })).status).toBe(200);
    expect(await countsOf(link.checkoutLinkId)).toEqual({ n: 2, total: 1400 });
  });

  it("disabled after it was paid (and so kept by the isolate): an agent that could not pay it anyway is still told 409 checkout_link_disabled, never 402", async () => {
    const merchant = await createMerchant();
    const rich = await createAgent({ credit: 5000 });
    const broke = await createAgent({ credit: 0 });
    const link = (await createLink(merchant.apiKey)).body;
    expect((await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: rich.apiKey })).status).toBe(200);
    expect((await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: broke.apiKey })).status).toBe(402);
    await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
      token: merchant.apiKey,
      body: { active: false },
    });
    for (const agent of [broke, rich]) {
      const refused = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
      expect(refused.status).toBe(409);
      expect(refused.body).toEqual({ error: "checkout_link_disabled" });
    }
    expect(await countsOf(link.checkoutLinkId)).toEqual({ n: 1, total: 700 });
  });

  it("another merchant's link is 404 to PATCH; unknown token 404 to pay", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    const agent = await createAgent({ credit: 5000 });
    const link = (await createLink(merchant.apiKey)).body;
    const patch = await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
      token: other.apiKey,
      body: { active: false },
    });
    expect(patch.status).toBe(404);
    expect((await api("GET", `/checkout/${link.checkoutToken}`)).body.active).toBe(true);
    expect((await api("POST", "/checkout/ct_nope/pay", { token: agent.apiKey })).status).toBe(404);
  });

  it("two agents paying one link concurrently each get their own charge and the counters add up", async () => {
    const merchant = await createMerchant();
    const agents = await Promise.all(Array.from({ length: 5 }, () => createAgent({ credit: 5000 })));
    const link = (await createLink(merchant.apiKey)).body;
    const results = await Promise.all(
      agents.flatMap((a) =>
        [a, a].map((agent) => api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey })),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(new Set(results.map((r) => r.body.charge.chargeId)).size).toBe(10);
    expect((await api("GET", `/checkout/${link.checkoutToken}`)).body).toMatchObject({
      paymentsCount: 10,
      totalPaidMinor: 7000,
    });
    expect(await countsOf(link.checkoutLinkId)).toEqual({ n: 10, total: 7000 });
    expect(await merchantBalance(merchant.apiKey)).toBe(7000);
    for (const agent of agents) expect(await balanceOf(agent.apiKey)).toBe(3600);
  });
});
