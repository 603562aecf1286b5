import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard } from "../../src/db/shards";
import { recoverTransfers } from "../../src/ledger/transfer-recovery";
import { setFaultHook } from "../../src/lib/faults";
import { api } from "../helpers/api";
import { createCharge, payCharge } from "../helpers/factories";
import { injectOnce } from "../helpers/faults";
import { agentOn, expectShardsAtRest, homeBalance, merchantOn, pendingTransfers } from "./helpers";

// The recovery of transfers across shards: one transfer that cannot be driven now does not hold the
// others of its agent, and an id naming a shard this deployment does not run is a 404, not a 500.

afterEach(() => setFaultHook(null));

const statusOf = async (id: string) =>
  (await dbOfShard(env, 0).prepare("SELECT status FROM ledger_transfers WHERE id = ?").bind(id).first<{
    status: string;
  }>())!.status;

describe("recovering an agent's transfers", () => {
  it("drives the agent's other transfers when one of them fails, and the failed one on the next pass", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 1_000 });
    // Two payments whose transfers are sent, then left pending (each request fails right after the send).
    setFaultHook((at) => {
      if (at === "transfer.after_send") throw new Error("injected fault at transfer.after_send");
    });
    for (const amount of [100, 200]) {
      const charge = await createCharge(merchant.apiKey, amount);
      expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(500);
    }
    setFaultHook(null);
    const { results } = await dbOfShard(env, 0)
      .prepare("SELECT id FROM ledger_transfers WHERE agent_id = ? AND status = 'pending' ORDER BY created_at")
      .bind(agent.agentId)
      .all<{ id: string }>();
    expect(results).toHaveLength(2);

    // The cron's pass: the first transfer's drive fails; the second is still driven to its end.
    const fired = injectOnce("transfer.before_settle");
    expect(await recoverTransfers(env, Date.now() + 120_000)).toBe(2);
    expect(fired()).toBe(true);
    setFaultHook(null);
    expect((await Promise.all(results.map((t) => statusOf(t.id)))).sort()).toEqual(["completed", "pending"]);
    expect(await pendingTransfers()).toBe(1);

    // Its next attempt, once due, finishes it.
    expect(await recoverTransfers(env, Date.now() + 10 * 60_000)).toBe(1);
    expect(await Promise.all(results.map((t) => statusOf(t.id)))).toEqual(["completed", "completed"]);
    expect(await homeBalance("agent", agent.agentId)).toBe(700);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(300);
    await expectShardsAtRest();
  });
});

describe("ids naming a shard this deployment does not run", () => {
  it("are unknown objects: 404, never a missing binding's 500", async () => {
    const merchant = await merchantOn(0);
    const agent = await agentOn(0, { credit: 100 });
    const charge = "chg_s7_aaaaaaaaaaaaaaaaaaaaaaaa";
    expect((await api("GET", `/charges/${charge}`)).status).toBe(404);
    expect((await payCharge(agent.apiKey, charge)).status).toBe(404);
    const refunds = `/merchant/charges/${charge}/refunds`;
    expect((await api("GET", refunds, { token: merchant.apiKey })).status).toBe(404);
    expect((await api("POST", refunds, { token: merchant.apiKey, body: {} })).status).toBe(404);
    expect(
      (await api("GET", "/merchant/payouts/po_s7_aaaaaaaaaaaaaaaaaaaaaaaa", { token: merchant.apiKey })).status,
    ).toBe(404);
  });
});

describe("an agent the directory does not know", () => {
  it("is 404 agent_not_found on the console's credit, policy and freeze routes, as on its page", async () => {
    const token = await (await import("../helpers/api")).consoleToken();
    for (const agentId of ["agent_s9_x", "agent_zzzzzzzzzzzzzzzzzzzzzzzz"]) {
      const answers = [
        await api("POST", `/console/agents/${agentId}/credits`, { token, body: { amountUsdCents: 1 } }),
        await api("PUT", `/console/agents/${agentId}/policy`, { token, body: {} }),
        await api("POST", `/console/agents/${agentId}/freeze`, { token, body: {} }),
        await api("GET", `/console/agents/${agentId}`, { token }),
      ];
      expect(answers.map((a) => [a.status, a.body])).toEqual(answers.map(() => [404, { error: "agent_not_found" }]));
    }
  });
});
