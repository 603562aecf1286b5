import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { setFaultHook } from "../../src/lib/faults";
import { createCharge, createCheckoutLink } from "../helpers/factories";
import { injectOnce } from "../helpers/faults";
import { callTool, connectAgent } from "../mcp/client";
import { agentOn, expectShardsAtRest, homeBalance, merchantOn } from "./helpers";

/*
 * The MCP paying tools' idempotencyKey across shards, when the first call's answer is lost after its
 * transfer left the agent's shard (a 5xx frees the key before the transfer settles, so no answer is
 * kept): the retry under the same key is answered with that payment, never paid a second time, as
 * the HTTP routes' Idempotency-Key is. An outside attack paid a checkout link twice this way.
 */
afterEach(() => setFaultHook(null));

const chargesOfLink = async (linkId: string) =>
  (await dbOfShard(env, shardOfId(linkId))
    .prepare("SELECT COUNT(*) AS n FROM charges WHERE checkout_link_id = ?")
    .bind(linkId)
    .first<{ n: number }>())!.n;

describe("an MCP paying tool's retry after a lost answer across shards", () => {
  for (const [point, recovery] of [
    ["transfer.after_send", "none"],
    ["transfer.after_send", "alarm"],
    ["transfer.after_arrive", "alarm"],
  ] as const) {
    it(`pay_checkout_link: a fault at ${point}, recovery by ${recovery}, pays once`, async () => {
      const merchant = await merchantOn(1);
      const agent = await agentOn(0, { credit: 1_000 });
      const link = await createCheckoutLink(merchant.apiKey, 250);
      const client = await connectAgent(agent.apiKey);
      const args = { token: link.checkoutToken, idempotencyKey: `mcp-lost-${point}-${recovery}` };
      const fired = injectOnce(point, point === "transfer.after_arrive" ? "abort" : "throw");
      const first = await callTool(client, "pay_checkout_link", args);
      expect(fired()).toBe(true);
      setFaultHook(null);
      expect(first.isError).toBe(true);
      // The money left the agent's shard: the first step landed before the answer was lost.
      expect(await homeBalance("agent", agent.agentId)).toBe(750);
      if (recovery === "alarm") await runDurableObjectAlarm(env.WALLET.getByName(agent.agentId));
      const retry = await callTool(client, "pay_checkout_link", args);
      expect(retry.isError).toBe(false);
      expect(retry.body.charge).toMatchObject({ status: "paid", amountMinor: 250 });
      // Once more: the answer is kept under the key now, the same charge.
      const again = await callTool(client, "pay_checkout_link", args);
      expect(again.body.charge.chargeId).toBe(retry.body.charge.chargeId);
      expect(await chargesOfLink(link.checkoutLinkId)).toBe(1);
      expect(await homeBalance("agent", agent.agentId)).toBe(750);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(250);
      await expectShardsAtRest();
    });
  }

  it("pay_charge: a fault after the send, the retry answers the one payment", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 300);
    const client = await connectAgent(agent.apiKey);
    const args = { chargeId: charge.chargeId, idempotencyKey: "mcp-lost-charge" };
    const fired = injectOnce("transfer.after_send");
    const first = await callTool(client, "pay_charge", args);
    expect(fired()).toBe(true);
    setFaultHook(null);
    expect(first.isError).toBe(true);
    const retry = await callTool(client, "pay_charge", args);
    expect(retry.isError).toBe(false);
    expect(retry.body.charge).toMatchObject({ chargeId: charge.chargeId, status: "paid" });
    expect(await homeBalance("agent", agent.agentId)).toBe(700);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(300);
    await expectShardsAtRest();
  });
});

describe("get_charge across shards", () => {
  it("reads a charge where its id says it lives, and a shard not run is unknown", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 300);
    expect(shardOfId(charge.chargeId)).toBe(1);
    const client = await connectAgent(agent.apiKey);
    const read = await callTool(client, "get_charge", { chargeId: charge.chargeId });
    expect(read.isError).toBe(false);
    expect(read.body).toMatchObject({ chargeId: charge.chargeId, status: "pending", amountMinor: 300 });
    const elsewhere = await callTool(client, "get_charge", { chargeId: charge.chargeId.replace("_s1_", "_s7_") });
    expect(elsewhere.isError).toBe(true);
    expect(elsewhere.body).toMatchObject({ error: "charge_not_found" });
  });
});
