import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard } from "../../src/db/shards";
import { setFaultHook } from "../../src/lib/faults";
import { api } from "../helpers/api";
import { createCharge } from "../helpers/factories";
import { injectOnce } from "../helpers/faults";
import { agentOn, expectShardsAtRest, homeBalance, merchantOn } from "./helpers";

/*
 * A retry whose first transfer is still pending must not pay again or store a refusal under the key
 * (found by a review: the retry answered 402 and stored it, and the first transfer then completed).
 */
afterEach(() => setFaultHook(null));

const payWithKey = (agentKey: string, chargeId: string, key: string) =>
  api("POST", `/charges/${chargeId}/pay`, { token: agentKey, headers: { "idempotency-key": key } });

describe("a retry while the first transfer is still pending", () => {
  it("must not store a refusal under the key of a payment that then completes", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 500 });
    const charge = await createCharge(merchant.apiKey, 300);
    const key = "review-pending-retry";
    // First attempt: P1 lands, the inline driver stops (500, key freed).
    const fired = injectOnce("transfer.after_send");
    const first = await payWithKey(agent.apiKey, charge.chargeId, key);
    expect(fired()).toBe(true);
    expect(first.status).toBe(500);
    // Retry with the same key while shard 1's sequencer fails once: the retry's drive leaves it pending.
    const fired2 = injectOnce("ledger.before_batch");
    const retry = await payWithKey(agent.apiKey, charge.chargeId, key);
    expect(fired2()).toBe(true);
    setFaultHook(null);
    // Its own outcome is not decided yet: answered 5xx (not stored), the key free again.
    expect(retry.status).toBeGreaterThanOrEqual(500);
    // The alarm finishes the first transfer: the charge is paid by this agent, under this key's request.
    await runDurableObjectAlarm(env.WALLET.getByName(agent.agentId));
    const stored = await dbOfShard(env, 1)
      .prepare("SELECT status, agent_id AS agentId FROM charges WHERE id = ?")
      .bind(charge.chargeId)
      .first<{ status: string; agentId: string }>();
    expect(await homeBalance("agent", agent.agentId)).toBe(200);
    const replay = await payWithKey(agent.apiKey, charge.chargeId, key);
    expect(stored).toEqual({ status: "paid", agentId: agent.agentId });
    await expectShardsAtRest();
    // The key answers the payment its first request made, as a same-shard payment's would.
    expect(replay.status).toBe(200);
    expect(replay.body.charge).toMatchObject({ chargeId: charge.chargeId, status: "paid" });
  });
});
