import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { grantObjectOf } from "../../src/paylinks/grant.do";
import { api } from "../helpers/api";
import { balanceOf, createAgent, createMerchant } from "../helpers/factories";

/*
 * A grant object keeps its grant's figures in memory and ends a draw's turn
 * once the draw is handed to the agent's wallet (issue 8: one grant). Each
 * draw's batch checks the exact figures it was decided on, so every answer's
 * spend is the committed one; a draw decided on figures that an earlier draw
 * in flight then failed to reach is decided again.
 */
async function acceptedGrant(budgetUsdCents: number, credit: number) {
  const merchant = await createMerchant();
  const agent = await createAgent({ credit });
  const created = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents } });
  expect(created.status).toBe(201);
  const accepted = await api("POST", `/pl/${created.body.code}/accept`, { token: agent.apiKey });
  expect(accepted.status).toBe(200);
  return { merchant, agent, code: created.body.code as string, grantId: accepted.body.grantId as string };
}

const grantRow = (grantId: string) =>
  env.DB.prepare("SELECT spent_minor AS spentMinor, uses FROM paylink_grants WHERE id = ?")
    .bind(grantId)
    .first<{ spentMinor: number; uses: number }>();

describe("draws on one grant in flight together", () => {
  it("share the ledger's batches, and each answer names the figures its own batch committed", async () => {
    const { merchant, agent, code, grantId } = await acceptedGrant(1000, 5000);
    const ledger = ledgerOf(env, 0);
    const before = await ledger.stats();
    const responses = await Promise.all(
      Array.from({ length: 12 }, () =>
        api("POST", `/merchant/paylinks/${code}/charge`, {
          token: merchant.apiKey,
          body: { agentId: agent.agentId, amountUsdCents: 100 },
        }),
      ),
    );
    const after = await ledger.stats();
    const paid = responses.filter((r) => r.status === 200);
    expect(paid.map((r) => r.body.spentMinor).sort((a, b) => a - b)).toEqual([
      100, 200, 300, 400, 500, 600, 700, 800, 900, 1000,
    ]);
    for (const r of paid) expect(r.body.remainingMinor).toBe(1000 - r.body.spentMinor);
    expect(paid.filter((r) => r.body.exhausted)).toHaveLength(1);
    expect(responses.filter((r) => r.status === 409).map((r) => r.body.error)).toEqual([
      "paylink_exhausted",
      "paylink_exhausted",
    ]);
    expect(after.plans - before.plans).toBe(10);
    expect(after.batches - before.batches).toBeLessThan(10);
    expect(await grantRow(grantId)).toEqual({ spentMinor: 1000, uses: 10 });
    expect(await balanceOf(agent.apiKey)).toBe(4000);
    const exhausted = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'budget.exhausted' AND data LIKE ?",
    )
      .bind(`%${grantId}%`)
      .first<{ n: number }>();
    expect(exhausted?.n).toBe(1);
  });

  it("a draw the wallet refuses in flight: the draw decided after it is decided again and answers its true figures", async () => {
    const { agent, grantId } = await acceptedGrant(1000, 160);
    const grant = grantObjectOf(env, grantId);
    const draw = (amountMinor: number) => grant.draw({ grantId, amountMinor, description: null });
    // Decided in this order on spend 0, 100 and 300; the wallet pays the first, has not the 200 for the second,
    // and the third's batch finds spend 100, not 300: it is refused, decided again on 100, and paid.
    const [first, second, third] = await Promise.all([draw(100), draw(200), draw(50)]);
    expect(first).toMatchObject({ kind: "paid", spentMinor: 100, remainingMinor: 900, exhausted: false });
    expect(second).toEqual({ kind: "rejected", reason: "saldo_insuficiente" });
    expect(third).toMatchObject({ kind: "paid", spentMinor: 150, remainingMinor: 850, exhausted: false });
    expect(await grantRow(grantId)).toEqual({ spentMinor: 150, uses: 2 });
    expect(await balanceOf(agent.apiKey)).toBe(10);
  });

  it("routing a draw remembers PayLinks and grants, never a miss: a grant accepted after a refused draw works at once, another merchant still gets 404", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const created = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 500 } });
    const drawBy = (key: string) =>
      api("POST", `/merchant/paylinks/${created.body.code}/charge`, {
        token: key,
        body: { agentId: agent.agentId, amountUsdCents: 10 },
      });
    expect((await drawBy(merchant.apiKey)).body).toEqual({ error: "sin_grant_del_agente" });
    expect((await api("POST", `/pl/${created.body.code}/accept`, { token: agent.apiKey })).status).toBe(200);
    expect((await drawBy(merchant.apiKey)).body).toMatchObject({ spentMinor: 10, remainingMinor: 490 });
    expect((await drawBy(merchant.apiKey)).body).toMatchObject({ spentMinor: 20, remainingMinor: 480 });
    const foreign = await drawBy(other.apiKey);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: "paylink_not_found" });
  });
});
