import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { balanceOf, createAgent, createMerchant, merchantBalance } from "../helpers/factories";

describe("checkout and paylink smoke", () => {
  it("two agents pay one checkout link; a PayLink is accepted and drawn to exhaustion", async () => {
    const merchant = await createMerchant({ name: "Links Inc" });
    const a = await createAgent({ credit: 10_000 });
    const b = await createAgent({ credit: 10_000 });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 700, description: "report" },
    });
    expect(link.status).toBe(201);
    const token = link.body.checkoutToken;
    const [pa, pb] = await Promise.all(
      [a, b].map((agent) => api("POST", `/checkout/${token}/pay`, { token: agent.apiKey })),
    );
    expect(pa!.status).toBe(200);
    expect(pb!.status).toBe(200);
    expect(pa!.body.charge.chargeId).not.toBe(pb!.body.charge.chargeId);
    const view = await api("GET", `/checkout/${token}`);
    expect(view.body).toMatchObject({
      paymentsCount: 2,
      totalPaidMinor: 1400,
      visits: 1,
      status: "active",
      merchantName: "Links Inc",
    });

    const pl = await api("POST", "/merchant/paylinks", {
      token: merchant.apiKey,
      body: { budgetUsdCents: 1000, perChargeUsdCents: 600, maxUses: 5 },
    });
    expect(pl.status).toBe(201);
    const code = pl.body.code;
    const accept = await api("POST", `/pl/${code}/accept`, { token: a.apiKey });
    expect(accept.status).toBe(200);
    expect(accept.body.grantId).toMatch(/^plg_/);
    const draw = (amount: number) =>
      api("POST", `/merchant/paylinks/${code}/charge`, {
        token: merchant.apiKey,
        body: { agentId: a.agentId, amountUsdCents: amount },
      });
    expect((await draw(700)).body).toEqual({ error: "excede_tope_por_uso" });
    const first = await draw(600);
    expect(first.body).toMatchObject({ paid: true, spentMinor: 600, remainingMinor: 400, exhausted: false });
    expect(first.body.charge.method).toBe("paylink");
    expect((await draw(500)).body).toEqual({ error: "excede_presupuesto_restante_400" });
    expect((await draw(400)).body).toMatchObject({ exhausted: true, remainingMinor: 0 });
    const after = await draw(1);
    expect(after.status).toBe(409);
    expect(after.body).toEqual({ error: "paylink_exhausted" });
    const noGrant = await api("POST", `/merchant/paylinks/${code}/charge`, {
      token: merchant.apiKey,
      body: { agentId: b.agentId, amountUsdCents: 1 },
    });
    expect(noGrant.body).toEqual({ error: "sin_grant_del_agente" });
    expect(await balanceOf(a.apiKey)).toBe(10_000 - 700 - 1000);
    expect(await merchantBalance(merchant.apiKey)).toBe(1400 + 1000);
  });
});
