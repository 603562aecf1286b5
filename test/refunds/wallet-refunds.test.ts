import { env } from "cloudflare:workers";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { paidCharge, refund, refundList } from "../helpers/money-out";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";

/*
 * Refunds of wallet payments (`ledger` and `paylink`): the merchant's balance goes back to the
 * paying agent's wallet in one batch, and the refund is `succeeded` at once.
 */

const uniqueHook = (name: string) => `${name}-${crypto.randomUUID().slice(0, 8)}`;

describe("refunds of wallet payments", () => {
  it("a partial refund credits the agent, debits the merchant, and the charge shows it everywhere", async () => {
    const { merchant, agent, chargeId } = await paidCharge(1_000, { credit: 1_500 });
    expect(await balanceOf(agent.apiKey)).toBe(500);
    expect(await merchantBalance(merchant.apiKey)).toBe(1_000);

    const res = await refund(merchant.apiKey, chargeId, { amountUsdCents: 300 });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body.refund).sort()).toEqual(
      [
        "amountMinor",
        // The exact amount in base units beside its cents, as a charge has.
        "amountBaseUnits",
        "chargeId",
        "createdAt",
        "currency",
        "failureReason",
        "method",
        "refundId",
        "status",
        "transaction",
      ].sort(),
    );
    expect(res.body.refund).toMatchObject({
      chargeId,
      amountMinor: 300,
      currency: "USD",
      method: "ledger",
      status: "succeeded",
      transaction: null,
      failureReason: null,
    });
    expect(res.body.refund.refundId).toMatch(/^re_/);
    expect(res.body.charge).toMatchObject({ chargeId, status: "paid", amountMinor: 1_000, refundedMinor: 300 });

    expect(await balanceOf(agent.apiKey)).toBe(800);
    expect(await merchantBalance(merchant.apiKey)).toBe(700);
    const publicView = await api("GET", `/charges/${chargeId}`);
    expect(publicView.body).toMatchObject({ status: "paid", refundedMinor: 300 });
    const list = await api("GET", "/merchant/charges", { token: merchant.apiKey });
    expect(list.body.charges.find((c: { chargeId: string }) => c.chargeId === chargeId).refundedMinor).toBe(300);
  });

  it("several refunds per charge, oldest first; without an amount what remains; never more than the charge", async () => {
    const { merchant, agent, chargeId } = await paidCharge(1_000);
    const first = await refund(merchant.apiKey, chargeId, { amountUsdCents: 100 });
    const second = await refund(merchant.apiKey, chargeId, { amountUsdCents: 250 });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body.charge.refundedMinor).toBe(350);

    const over = await refund(merchant.apiKey, chargeId, { amountUsdCents: 651 });
    expect(over.status).toBe(409);
    expect(over.body).toEqual({ error: "refund_exceeds_remaining" });

    const rest = await refund(merchant.apiKey, chargeId);
    expect(rest.status).toBe(201);
    expect(rest.body.refund.amountMinor).toBe(650);
    expect(rest.body.charge.refundedMinor).toBe(1_000);

    const again = await refund(merchant.apiKey, chargeId);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: "refund_exceeds_remaining" });
    expect((await refund(merchant.apiKey, chargeId, { amountUsdCents: 1 })).body).toEqual({
      error: "refund_exceeds_remaining",
    });

    const list = await refundList(merchant.apiKey, chargeId);
    expect(list.status).toBe(200);
    expect(list.body.refunds.map((r: { refundId: string }) => r.refundId)).toEqual([
      first.body.refund.refundId,
      second.body.refund.refundId,
      rest.body.refund.refundId,
    ]);
    expect(list.body.refunds.map((r: { amountMinor: number }) => r.amountMinor)).toEqual([100, 250, 650]);
    expect(list.body.refunds[0]).toEqual(first.body.refund);
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(1_000);
  });

  it("refuses unknown and others' charges (404), pending ones, bad amounts and a short balance, moving nothing", async () => {
    const { merchant, agent, chargeId } = await paidCharge(500);
    const other = await createMerchant();

    const unknown = await refund(merchant.apiKey, "chg_nonexistent", { amountUsdCents: 1 });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: "charge_not_found" });
    const foreign = await refund(other.apiKey, chargeId, { amountUsdCents: 1 });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: "charge_not_found" });
    expect((await refundList(other.apiKey, chargeId)).status).toBe(404);
    expect((await refundList(merchant.apiKey, "chg_nonexistent")).body).toEqual({ error: "charge_not_found" });

    const pending = await createCharge(merchant.apiKey, 200);
    const notPaid = await refund(merchant.apiKey, pending.chargeId, { amountUsdCents: 100 });
    expect(notPaid.status).toBe(409);
    expect(notPaid.body).toEqual({ error: "charge_not_paid" });

    for (const amountUsdCents of [0, -5, 1.5, "10", null]) {
      const bad = await refund(merchant.apiKey, chargeId, { amountUsdCents });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe("invalid_request");
    }
    expect((await refund(merchant.apiKey, chargeId, { amountUsdCents: 1, extra: true })).status).toBe(400);

    // The merchant pays most of its balance out: what is left does not cover the refund.
    const address = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } })).status).toBe(
      200,
    );
    const payout = await api("POST", "/merchant/payouts", { token: merchant.apiKey, body: { amountUsdCents: 400 } });
    expect(payout.status).toBe(201);
    const short = await refund(merchant.apiKey, chargeId, { amountUsdCents: 101 });
    expect(short.status).toBe(409);
    expect(short.body).toEqual({ error: "saldo_insuficiente" });
    const noAmount = await refund(merchant.apiKey, chargeId);
    expect(noAmount.body).toEqual({ error: "saldo_insuficiente" });

    expect(await merchantBalance(merchant.apiKey)).toBe(100);
    expect(await balanceOf(agent.apiKey)).toBe(0);
    expect((await refundList(merchant.apiKey, chargeId)).body).toEqual({ refunds: [] });
    expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(0);
    // What it does cover still goes.
    expect((await refund(merchant.apiKey, chargeId, { amountUsdCents: 100 })).status).toBe(201);
    expect(await balanceOf(agent.apiKey)).toBe(100);
  });

  it("does not give back the agent's daily spend: a refunded payment still counts toward today's limit", async () => {
    const { merchant, agent, chargeId } = await paidCharge(600, {
      credit: 5_000,
      policy: { dailyLimitUsdCents: 1_000 },
    });
    expect((await refund(merchant.apiKey, chargeId)).status).toBe(201);
    expect(await balanceOf(agent.apiKey)).toBe(5_000);
    // 600 spent today (refunded or not) + 500 is over the 1,000 limit.
    const next = await createCharge(merchant.apiKey, 500);
    const refused = await payCharge(agent.apiKey, next.chargeId);
    expect(refused.status).toBe(402);
    expect(refused.body.error).toBe("excede_limite_diario");
    const fits = await createCharge(merchant.apiKey, 400);
    expect((await payCharge(agent.apiKey, fits.chargeId)).status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(4_600);
  });

  it("sends charge.refunded to the merchant's endpoints with the charge's refunded sum after each refund", async () => {
    const { merchant, agent, chargeId } = await paidCharge(900);
    const hook = uniqueHook("refund-wallet");
    await registerEndpoint(hook, { merchantId: merchant.merchantId });
    const first = await refund(merchant.apiKey, chargeId, { amountUsdCents: 200 });
    const second = await refund(merchant.apiKey, chargeId, { amountUsdCents: 300 });
    const list = await waitForReceived(
      hook,
      (l) => l.filter((d) => JSON.parse(d.body).type === "charge.refunded").length >= 2,
    );
    const events = list.map((d) => JSON.parse(d.body)).filter((e) => e.type === "charge.refunded");
    const byRefund = (id: string) => events.find((e) => e.data.refundId === id)!.data;
    expect(byRefund(first.body.refund.refundId)).toEqual({
      refundId: first.body.refund.refundId,
      chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 200,
      amountBaseUnits: "2000000",
      refundedMinor: 200,
      refundedBaseUnits: "2000000",
      currency: "USD",
      method: "ledger",
      transaction: null,
    });
    expect(byRefund(second.body.refund.refundId)).toMatchObject({ amountMinor: 300, refundedMinor: 500 });
  });

  it("refunds a PayLink draw to the agent without giving the grant its budget back", async () => {
    const merchant = await createMerchant({ name: "Grant Co" });
    const agent = await createAgent({ credit: 5_000 });
    const pl = await api("POST", "/merchant/paylinks", {
      token: merchant.apiKey,
      body: { budgetUsdCents: 1_000, perChargeUsdCents: 600, maxUses: 5 },
    });
    expect(pl.status).toBe(201);
    expect((await api("POST", `/pl/${pl.body.code}/accept`, { token: agent.apiKey })).status).toBe(200);
    const draw = (amountUsdCents: number) =>
      api("POST", `/merchant/paylinks/${pl.body.code}/charge`, {
        token: merchant.apiKey,
        body: { agentId: agent.agentId, amountUsdCents },
      });
    const drawn = await draw(600);
    expect(drawn.body).toMatchObject({ paid: true, remainingMinor: 400 });
    const chargeId = drawn.body.charge.chargeId;

    const res = await refund(merchant.apiKey, chargeId, { amountUsdCents: 600 });
    expect(res.status).toBe(201);
    expect(res.body.refund).toMatchObject({ method: "paylink", status: "succeeded", amountMinor: 600 });
    expect(res.body.charge).toMatchObject({ method: "paylink", refundedMinor: 600, agentId: agent.agentId });
    expect(await balanceOf(agent.apiKey)).toBe(5_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    // The grant's 400 left is all that is left.
    expect((await draw(500)).body).toEqual({ error: "excede_presupuesto_restante_400" });
    expect((await draw(400)).body).toMatchObject({ paid: true, remainingMinor: 0, exhausted: true });
  });

  it("records one balanced posting merchant → agent and a charge.refunded audit row naming the refund", async () => {
    const { merchant, agent, chargeId } = await paidCharge(250);
    const res = await refund(merchant.apiKey, chargeId);
    const refundId = res.body.refund.refundId;
    const entries = await env.DB.prepare(
      "SELECT account, amount_minor AS amountMinor FROM ledger_entries WHERE transfer_id = ? ORDER BY amount_minor",
    )
      .bind(refundId)
      .all();
    expect(entries.results).toEqual([
      { account: `merchant:${merchant.merchantId}`, amountMinor: -250 },
      { account: `agent:${agent.agentId}`, amountMinor: 250 },
    ]);
    const audit = await env.DB.prepare(
      "SELECT type, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId, amount_minor AS amountMinor FROM audit_events WHERE reference = ?",
    )
      .bind(refundId)
      .all();
    expect(audit.results).toEqual([
      { type: "charge.refunded", chargeId, agentId: agent.agentId, merchantId: merchant.merchantId, amountMinor: 250 },
    ]);
    const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
    expect(verify.body.ok).toBe(true);
  });
});
