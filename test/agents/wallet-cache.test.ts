import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, creditAgent, payCharge } from "../helpers/factories";

/*
 * The wallet object keeps the agent's balance, policy and spend of the day in
 * memory between operations (src/agents/wallet.ts AgentStateCache). What
 * changes them otherwise than by a payment is read afresh; a figure that is
 * wrong anyway can only make the batch refuse, never overspend.
 */
describe("the wallet object's remembered figures", () => {
  it("follow payments, credits and policy changes exactly", async () => {
    const token = await consoleToken();
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 300, policy: { dailyLimitUsdCents: 500 } });
    const pay = async (cents: number) => payCharge(agent.apiKey, (await createCharge(merchant.apiKey, cents)).chargeId);
    expect((await pay(200)).status).toBe(200);
    expect((await pay(150)).body.error).toBe("saldo_insuficiente");
    await creditAgent(agent.agentId, 1000);
    expect((await pay(150)).status).toBe(200);
    // 350 spent today: 200 more would pass the daily limit of 500.
    expect((await pay(200)).body.error).toBe("excede_limite_diario");
    const policy = await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token,
      body: { maxPerTransactionUsdCents: 100 },
    });
    expect(policy.status).toBe(200);
    expect((await pay(120)).body.error).toBe("excede_tope_por_transaccion");
    expect((await pay(100)).status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(300 + 1000 - 200 - 150 - 100);
  });

  it("a figure that is wrong (changed behind the object's back) only makes the batch refuse, and is then read afresh", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    expect((await payCharge(agent.apiKey, (await createCharge(merchant.apiKey, 100)).chargeId)).status).toBe(200);
    // Nothing in the service does this; it stands for any figure the object got wrong.
    await env.DB.prepare("UPDATE agents SET balance_minor = 50, balance_base_units = 500000 WHERE id = ?")
      .bind(agent.agentId)
      .run();
    const refused = await payCharge(agent.apiKey, (await createCharge(merchant.apiKey, 100)).chargeId);
    expect(refused.status).toBe(402);
    expect(refused.body.error).toBe("saldo_insuficiente");
    expect(await balanceOf(agent.apiKey)).toBe(50);
    expect((await payCharge(agent.apiKey, (await createCharge(merchant.apiKey, 50)).chargeId)).status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(0);
  });

  it("one hot agent paying in parallel: every payment lands once, none past the balance", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const charges = await Promise.all(Array.from({ length: 14 }, () => createCharge(merchant.apiKey, 100)));
    const responses = await Promise.all(charges.map((c) => payCharge(agent.apiKey, c.chargeId)));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(10);
    expect(responses.filter((r) => r.status === 402 && r.body.error === "saldo_insuficiente")).toHaveLength(4);
    expect(await balanceOf(agent.apiKey)).toBe(0);
  });
});
