import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { placementOf } from "../../src/ledger/place";
import { api } from "../helpers/api";
import { chargesOf, facilitatorTerms, settle, v2Request } from "../helpers/facilitator";
import { createAgent, createMerchant, payCharge } from "../helpers/factories";
import { refund, refundsOf } from "../helpers/money-out";
import { creditBaseUnits, pendingBelowACent } from "../helpers/sub-cent";
import { waitFor } from "../helpers/wait";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { freshPayer, tokenBalance } from "../helpers/x402";

/*
 * Refunds of payments below a cent (or between cents), settled through the service as a merchant's
 * facilitator: the amount, the charge's refunded sum, the merchant's balance, the transfer back to
 * the payer, the event and the audit row are exact to the token's base unit.
 */

const FUNDS = 1_000_000n;

/** The merchant's balance as GET /merchant/me states it: in whole cents and exactly, in base units. */
const merchantMoney = async (key: string) => {
  const res = await api("GET", "/merchant/me", { token: key });
  expect(res.status).toBe(200);
  return { minor: res.body.merchant.balanceMinor as number, baseUnits: BigInt(res.body.merchant.balanceBaseUnits) };
};

/** A merchant paid `value` base units for a call by a fresh payer, through the facilitator. */
async function paidBelowACent(value: bigint, name: string) {
  const merchant = await createMerchant({ name });
  const terms = await facilitatorTerms(merchant.apiKey);
  const payer = await freshPayer(FUNDS);
  const settled = await settle(
    merchant.apiKey,
    await v2Request(payer.key, terms, { value, resource: "https://api.tiny.example/call" }),
  );
  expect(settled.body, settled.text).toMatchObject({ success: true });
  const [charge] = await chargesOf(merchant.apiKey);
  expect(charge).toMatchObject({ amountBaseUnits: String(value), status: "paid", refundedBaseUnits: "0" });
  expect(await tokenBalance(payer.address)).toBe(FUNDS - value);
  return { merchant, payer, chargeId: charge!.chargeId as string };
}

const decided = (merchantKey: string, chargeId: string, refundId: string) =>
  waitFor(
    `refund ${refundId}`,
    async () => (await refundsOf(merchantKey, chargeId)).find((r) => r.refundId === refundId)!,
    (r) => r.status !== "pending",
  );

describe("refunds below a cent", () => {
  it("a $0.001 payment refunded without an amount: exactly 1000 base units, back on chain to the payer", async () => {
    const { merchant, payer, chargeId } = await paidBelowACent(1000n, "Tenth Of A Cent Refunds");
    const hook = `refund-sub-cent-${crypto.randomUUID().slice(0, 8)}`;
    await registerEndpoint(hook, { merchantId: merchant.merchantId });
    const before = await merchantMoney(merchant.apiKey);

    // One cent is more than the tenth of a cent that remains: compared exactly, not in rounded cents.
    const cent = await refund(merchant.apiKey, chargeId, { amountUsdCents: 1 });
    expect(cent.status).toBe(409);
    expect(cent.body).toEqual({ error: "refund_exceeds_remaining" });
    expect(await merchantMoney(merchant.apiKey)).toEqual(before);

    const res = await refund(merchant.apiKey, chargeId);
    expect(res.status, res.text).toBe(201);
    expect(res.body.refund).toMatchObject({
      amountMinor: null,
      amountBaseUnits: "1000",
      method: "x402",
      status: "pending",
    });
    expect(res.body.charge).toMatchObject({ chargeId, refundedMinor: 0, refundedBaseUnits: "1000" });
    expect(await merchantMoney(merchant.apiKey)).toEqual({ minor: before.minor, baseUnits: before.baseUnits - 1000n });

    const done = await decided(merchant.apiKey, chargeId, res.body.refund.refundId);
    expect(done).toMatchObject({ status: "succeeded", amountMinor: null, amountBaseUnits: "1000" });
    expect(await tokenBalance(payer.address)).toBe(FUNDS);
    expect((await api("GET", `/charges/${chargeId}`)).body).toMatchObject({
      refundedMinor: 0,
      refundedBaseUnits: "1000",
    });

    const again = await refund(merchant.apiKey, chargeId);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: "refund_exceeds_remaining" });
    expect(await merchantMoney(merchant.apiKey)).toEqual({ minor: before.minor, baseUnits: before.baseUnits - 1000n });

    const [delivery] = await waitForReceived(hook, (l) => l.some((d) => JSON.parse(d.body).type === "charge.refunded"));
    expect(JSON.parse(delivery!.body).data).toMatchObject({
      refundId: done.refundId,
      amountMinor: null,
      amountBaseUnits: "1000",
      refundedMinor: 0,
      refundedBaseUnits: "1000",
      transaction: done.transaction,
    });
    const audit = await env.DB.prepare(
      "SELECT type, amount_base_units AS baseUnits FROM audit_events WHERE reference = ? ORDER BY seq",
    )
      .bind(done.refundId)
      .all<{ type: string; baseUnits: string }>();
    expect(audit.results).toEqual([
      { type: "refund.created", baseUnits: "1000" },
      { type: "charge.refunded", baseUnits: "1000" },
    ]);
    // Its receipt states the exact amount too, never a rounded one.
    const receipt = await api("GET", `/merchant/refunds/${done.refundId}/receipt`, { token: merchant.apiKey });
    expect(receipt.status, receipt.text).toBe(200);
    const payload = JSON.parse(atob(receipt.body.receipt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    expect(payload).toMatchObject({
      type: "refund",
      refundId: done.refundId,
      amountMinor: null,
      amountBaseUnits: "1000",
    });
  });

  it("two refunds at once of what remains: exactly one is taken", async () => {
    const { merchant, chargeId } = await paidBelowACent(1000n, "Racing Sub Cent Refunds");
    const before = await merchantMoney(merchant.apiKey);
    const answers = await Promise.all([refund(merchant.apiKey, chargeId), refund(merchant.apiKey, chargeId)]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    expect(answers.find((a) => a.status === 409)!.body).toEqual({ error: "refund_exceeds_remaining" });
    expect(await merchantMoney(merchant.apiKey)).toEqual({ minor: before.minor, baseUnits: before.baseUnits - 1000n });
    const refunds = await refundsOf(merchant.apiKey, chargeId);
    expect(refunds.map((r) => r.amountBaseUnits)).toEqual(["1000"]);
  });

  it("a refund of what remains, raced by cents taken at once, takes what is left when its batch lands", async () => {
    // 10,010 base units: one cent can be taken by the racers, the ten units left only by the refund of what remains.
    for (let round = 0; round < 4; round++) {
      const { merchant, chargeId } = await paidBelowACent(10_010n, `Raced Remainder ${round}`);
      const key = { "Idempotency-Key": `remainder-${chargeId}` };
      // The refund of what remains is sent last, so the cents' batches tend to land between its read and its own.
      const answers = await Promise.all([
        ...Array.from({ length: 5 }, () => refund(merchant.apiKey, chargeId, { amountUsdCents: 1 })),
        refund(merchant.apiKey, chargeId, {}, key),
      ]);
      const rest = answers.pop();
      const cents = answers;
      expect(rest!.status, rest!.text).toBe(201);
      const taken = cents.filter((c) => c.status === 201).length;
      expect(taken).toBeLessThanOrEqual(1);
      expect(rest!.body.refund.amountBaseUnits).toBe(taken ? "10" : "10010");
      const refunds = await refundsOf(merchant.apiKey, chargeId);
      expect(refunds.reduce((sum, r) => sum + BigInt(r.amountBaseUnits), 0n)).toBe(10_010n);
      // The key answers the refund made, not a refusal.
      const again = await refund(merchant.apiKey, chargeId, {}, key);
      expect(again.body.refund?.refundId).toBe(rest!.body.refund.refundId);
    }
  });

  it("2.5 cents refunded 2 cents, then the rest: 5,000 base units", async () => {
    const { merchant, payer, chargeId } = await paidBelowACent(25_000n, "Two And A Half Cents");
    const before = await merchantMoney(merchant.apiKey);

    const two = await refund(merchant.apiKey, chargeId, { amountUsdCents: 2 });
    expect(two.status, two.text).toBe(201);
    expect(two.body.refund).toMatchObject({ amountMinor: 2, amountBaseUnits: "20000" });
    expect(two.body.charge).toMatchObject({ amountMinor: null, refundedMinor: 2, refundedBaseUnits: "20000" });
    // Another cent is more than the half cent that remains.
    expect((await refund(merchant.apiKey, chargeId, { amountUsdCents: 1 })).body).toEqual({
      error: "refund_exceeds_remaining",
    });

    const rest = await refund(merchant.apiKey, chargeId);
    expect(rest.status, rest.text).toBe(201);
    expect(rest.body.refund).toMatchObject({ amountMinor: null, amountBaseUnits: "5000" });
    expect(rest.body.charge).toMatchObject({ refundedMinor: 2, refundedBaseUnits: "25000" });
    expect(await merchantMoney(merchant.apiKey)).toEqual({
      minor: before.minor - 2,
      baseUnits: before.baseUnits - 25_000n,
    });

    for (const r of [two, rest])
      expect((await decided(merchant.apiKey, chargeId, r.body.refund.refundId)).status).toBe("succeeded");
    expect(await tokenBalance(payer.address)).toBe(FUNDS);
    expect((await refund(merchant.apiKey, chargeId)).body).toEqual({ error: "refund_exceeds_remaining" });
  });
});

describe("a wallet payment below a cent, refunded", () => {
  it("moves exactly its base units back to the agent, in the refund's one batch", async () => {
    const merchant = await createMerchant({ name: "Per Call Wallet" });
    const agent = await createAgent();
    await creditBaseUnits(agent.agentId, 10_000n);
    const chargeId = await pendingBelowACent(merchant.merchantId, 2_500n);
    const paid = await payCharge(agent.apiKey, chargeId);
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    expect(await merchantMoney(merchant.apiKey)).toEqual({ minor: 0, baseUnits: 2_500n });

    const res = await refund(merchant.apiKey, chargeId, {});
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.refund).toMatchObject({ amountMinor: null, amountBaseUnits: "2500", status: "succeeded" });
    expect(res.body.charge).toMatchObject({ refundedMinor: 0, refundedBaseUnits: "2500" });
    expect(await merchantMoney(merchant.apiKey)).toEqual({ minor: 0, baseUnits: 0n });
    const balance = await api("GET", "/balance", { token: agent.apiKey });
    expect(balance.body.balanceBaseUnits).toBe("10000");

    const home = await placementOf(env).ofAgent(agent.agentId);
    const entries = await home.db
      .prepare("SELECT account, CAST(amount_base_units AS TEXT) AS units FROM ledger_entries WHERE transfer_id = ?")
      .bind(res.body.refund.refundId)
      .all<{ account: string; units: string }>();
    expect(entries.results.map((e) => [e.account, e.units]).sort()).toEqual(
      [
        [`agent:${agent.agentId}`, "2500"],
        [`merchant:${merchant.merchantId}`, "-2500"],
      ].sort(),
    );
  });
});
