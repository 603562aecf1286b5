import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { api, consoleToken } from "../helpers/api";
import { createCharge, payCharge } from "../helpers/factories";
import {
  agentOn,
  chargePaidRows,
  entrySum,
  expectChainVerifies,
  expectShardsAtRest,
  homeBalance,
  inFlight,
  merchantOn,
  paymentEvents,
} from "./helpers";

/*
 * Wallet payments with two ledger shards: within shard 1 as one batch there, and across shards as a
 * two-phase transfer through transit accounts that answers exactly as a same-shard payment does.
 */
describe("a wallet payment within shard 1", () => {
  it("pays in shard 1's database and chain, and shard 0 sees nothing of it", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(1, { credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 300);
    expect(shardOfId(charge.chargeId)).toBe(1);
    const paid = await payCharge(agent.apiKey, charge.chargeId);
    expect(paid.status).toBe(200);
    expect(paid.body.charge.reference).toMatch(/^PAY_S1_/);
    expect(paid.body.merchantBalanceMinor).toBe(300);
    expect(await homeBalance("agent", agent.agentId)).toBe(700);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(300);
    // The control rows of owners living in shard 1 hold no money.
    const control = await env.DB.prepare("SELECT balance_minor AS b FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first<{ b: number }>();
    expect(control!.b).toBe(0);
    expect((await api("GET", "/balance", { token: agent.apiKey })).body.balanceMinor).toBe(700);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("paid");
    expect(await paymentEvents(charge.chargeId)).toEqual(["charge.succeeded", "payment.succeeded"]);
    const transfers = await dbOfShard(env, 1)
      .prepare("SELECT COUNT(*) AS n FROM ledger_transfers")
      .first<{ n: number }>();
    expect(transfers!.n).toBe(0);
    await expectChainVerifies(1);
    await expectShardsAtRest();
  });
});

describe("Idempotency-Keys of answers stored in shard 1", () => {
  it("a charge's creation, its payment and a credit replay from the shard their batch stored them in", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(1);
    const headers = { "idempotency-key": "shard-1-credit" };
    const token = await consoleToken();
    const credit = () =>
      api("POST", `/console/agents/${agent.agentId}/credits`, { token, headers, body: { amountUsdCents: 900 } });
    const credited = await credit();
    expect(credited.status).toBe(200);
    expect(credited.body.balanceMinor).toBe(900);
    const again = await credit();
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(credited.text);
    expect(await homeBalance("agent", agent.agentId)).toBe(900);

    const create = () =>
      api("POST", "/merchant/charges", {
        token: merchant.apiKey,
        headers: { "idempotency-key": "shard-1-charge" },
        body: { amountUsdCents: 200 },
      });
    const created = await create();
    expect(created.status).toBe(201);
    expect((await create()).text).toBe(created.text);
    const pay = () =>
      api("POST", `/charges/${created.body.chargeId}/pay`, {
        token: agent.apiKey,
        headers: { "idempotency-key": "shard-1-pay" },
      });
    const paid = await pay();
    expect(paid.status).toBe(200);
    const replay = await pay();
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(paid.text);
    const kept = await dbOfShard(env, 1)
      .prepare(
        "SELECT COUNT(*) AS n FROM idempotency_keys WHERE key IN ('shard-1-credit', 'shard-1-charge', 'shard-1-pay')",
      )
      .first<{ n: number }>();
    expect(kept!.n).toBe(3);
    expect(await homeBalance("agent", agent.agentId)).toBe(700);
    await expectShardsAtRest();
  });
});

describe("a wallet payment across shards", () => {
  for (const [from, to] of [
    [0, 1],
    [1, 0],
  ] as const) {
    it(`agent in shard ${from} pays a charge in shard ${to}: the same answer, money moved once`, async () => {
      const merchant = await merchantOn(to);
      const agent = await agentOn(from, { credit: 1_000 });
      const charge = await createCharge(merchant.apiKey, 250, { description: "a report" });
      const paid = await api("POST", `/charges/${charge.chargeId}/pay`, {
        token: agent.apiKey,
        headers: { "idempotency-key": `xshard-${from}-${to}` },
      });
      expect(paid.status).toBe(200);
      expect(Object.keys(paid.body).sort()).toEqual(["charge", "merchantBalanceMinor", "paid"]);
      expect(paid.body).toMatchObject({
        paid: true,
        merchantBalanceMinor: 250,
        charge: { chargeId: charge.chargeId, status: "paid", method: "ledger", agentId: agent.agentId },
      });
      expect(await homeBalance("agent", agent.agentId)).toBe(750);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(250);
      expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({
        status: "paid",
        reference: paid.body.charge.reference,
      });
      expect(await chargePaidRows(charge.chargeId)).toEqual([{ reference: paid.body.charge.reference }]);
      expect(await paymentEvents(charge.chargeId)).toEqual(["charge.succeeded", "payment.succeeded"]);
      // The same key replays the same 200.
      const again = await api("POST", `/charges/${charge.chargeId}/pay`, {
        token: agent.apiKey,
        headers: { "idempotency-key": `xshard-${from}-${to}` },
      });
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.text).toBe(paid.text);
      // A second payment of the paid charge is refused as within one shard.
      const twice = await payCharge(agent.apiKey, charge.chargeId);
      expect(twice.status).toBe(409);
      expect(twice.body.error).toBe("charge_not_pending");
      // The sending shard recorded the transfer, completed; the receiving shard its one arrival.
      const sent = await dbOfShard(env, from)
        .prepare("SELECT status, to_shard AS toShard FROM ledger_transfers WHERE id = ?")
        .bind(paid.body.charge.reference)
        .first();
      expect(sent).toEqual({ status: "completed", toShard: to });
      const arrived = await dbOfShard(env, to)
        .prepare(
          "SELECT outcome, from_shard AS fromShard, balance_after AS balanceAfter FROM ledger_arrivals WHERE id = ?",
        )
        .bind(paid.body.charge.reference)
        .first();
      expect(arrived).toEqual({ outcome: "applied", fromShard: from, balanceAfter: 250 });
      expect(await inFlight()).toBe(0);
      expect((await entrySum(0)) + (await entrySum(1))).toBe(0);
      await expectShardsAtRest();
    });
  }

  it("refuses what a same-shard payment refuses, with the same answer and no money moved", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 100 });
    const charge = await createCharge(merchant.apiKey, 500);
    const poor = await payCharge(agent.apiKey, charge.chargeId);
    const sameShardMerchant = await merchantOn(0);
    const sameShardCharge = await createCharge(sameShardMerchant.apiKey, 500);
    const poorHere = await payCharge(agent.apiKey, sameShardCharge.chargeId);
    expect(poor.status).toBe(poorHere.status);
    expect(poor.body).toEqual(poorHere.body);
    expect(await homeBalance("agent", agent.agentId)).toBe(100);
    await expectShardsAtRest();
  });
});
