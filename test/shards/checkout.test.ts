import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { recoverTransfers } from "../../src/ledger/transfer-recovery";
import { setFaultHook } from "../../src/lib/faults";
import { api } from "../helpers/api";
import { injectOnce } from "../helpers/faults";
import {
  agentOn,
  chargePaidRows,
  expectShardsAtRest,
  homeBalance,
  inFlight,
  merchantOn,
  paymentEvents,
} from "./helpers";

/*
 * Checkout links with two ledger shards: the link lives in its merchant's shard (id and token naming
 * it), each payment's charge is born there, in the batch that pays it (the arrival, across shards).
 */

afterEach(() => setFaultHook(null));

const newLink = async (merchantKey: string, amountUsdCents: number) => {
  const res = await api("POST", "/merchant/checkout", {
    token: merchantKey,
    body: { amountUsdCents, description: "one report" },
  });
  expect(res.status).toBe(201);
  return res.body as { checkoutLinkId: string; checkoutToken: string };
};
const pay = (agentKey: string, token: string, key?: string) =>
  api("POST", `/checkout/${token}/pay`, {
    token: agentKey,
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });
const chargesOfLink = async (linkId: string) =>
  (await dbOfShard(env, shardOfId(linkId))
    .prepare("SELECT COUNT(*) AS n FROM charges WHERE checkout_link_id = ?")
    .bind(linkId)
    .first<{ n: number }>())!.n;

const PAIRS: [number, number][] = [
  [1, 1],
  [0, 1],
  [1, 0],
];

describe("checkout links across ledger shards", () => {
  for (const [m, a] of PAIRS) {
    it(`merchant in ${m}, agent in ${a}: the charge born and paid on the merchant's shard`, async () => {
      const merchant = await merchantOn(m);
      const agent = await agentOn(a, { credit: 1_000 });
      const link = await newLink(merchant.apiKey, 300);
      expect(shardOfId(link.checkoutLinkId)).toBe(m);
      expect(shardOfId(link.checkoutToken)).toBe(m);
      expect((await api("GET", `/checkout/${link.checkoutToken}`)).status).toBe(200);

      const paid = await pay(agent.apiKey, link.checkoutToken, `co-${m}-${a}`);
      expect(paid.status).toBe(200);
      const chargeId = paid.body.charge.chargeId as string;
      expect(shardOfId(chargeId)).toBe(m);
      expect(paid.body.charge).toMatchObject({ status: "paid", agentId: agent.agentId, amountMinor: 300 });
      // The key replays the same answer from the agent's home shard.
      const replay = await pay(agent.apiKey, link.checkoutToken, `co-${m}-${a}`);
      expect(replay.text).toBe(paid.text);
      expect((await pay(agent.apiKey, link.checkoutToken)).status).toBe(200);

      expect(await homeBalance("agent", agent.agentId)).toBe(400);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(600);
      expect(await chargesOfLink(link.checkoutLinkId)).toBe(2);
      expect(await paymentEvents(chargeId)).toEqual(["charge.succeeded", "payment.succeeded"]);
      expect(await chargePaidRows(chargeId)).toHaveLength(1);
      const listed = await api("GET", "/merchant/checkout-links", { token: merchant.apiKey });
      expect(listed.body.links[0]).toMatchObject({ paymentsCount: 2, totalPaidMinor: 600 });
      await expectShardsAtRest();
    });
  }

  it("a link disabled on the merchant's shard refuses a payment from another shard, leaving no charge", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 1_000 });
    const link = await newLink(merchant.apiKey, 300);
    const patched = await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
      token: merchant.apiKey,
      body: { active: false },
    });
    expect(patched.status).toBe(200);
    const refused = await pay(agent.apiKey, link.checkoutToken);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("checkout_link_disabled");
    expect(await chargesOfLink(link.checkoutLinkId)).toBe(0);
    expect(await homeBalance("agent", agent.agentId)).toBe(1_000);
    // Another merchant cannot touch it.
    const other = await merchantOn(1);
    expect(
      (
        await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
          token: other.apiKey,
          body: { active: true },
        })
      ).status,
    ).toBe(404);
    await expectShardsAtRest();
  });

  for (const how of ["alarm", "cron"] as const) {
    it(`a crash after the arrival of a checkout payment across shards is settled by the ${how}`, async () => {
      const [m, a] = how === "alarm" ? [0, 1] : [1, 0];
      const merchant = await merchantOn(m);
      const agent = await agentOn(a, { credit: 1_000 });
      const link = await newLink(merchant.apiKey, 300);
      const key = `co-fault-${how}`;
      const fired = injectOnce("transfer.after_arrive", "abort");
      const first = await pay(agent.apiKey, link.checkoutToken, key);
      expect(fired()).toBe(true);
      setFaultHook(null);
      expect(first.status).toBe(500);
      if (how === "alarm") await runDurableObjectAlarm(env.WALLET.getByName(agent.agentId));
      else await recoverTransfers(env, Date.now() + 120_000);
      expect(await inFlight()).toBe(0);
      // The retry under the same key is answered with the payment that landed, never paid twice.
      const retry = await pay(agent.apiKey, link.checkoutToken, key);
      expect(retry.status).toBe(200);
      expect(retry.body.charge).toMatchObject({ status: "paid", amountMinor: 300 });
      expect(await chargesOfLink(link.checkoutLinkId)).toBe(1);
      expect(await homeBalance("agent", agent.agentId)).toBe(700);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(300);
      await expectShardsAtRest();
    });
  }
});
