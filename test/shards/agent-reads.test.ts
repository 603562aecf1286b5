import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { api, consoleToken } from "../helpers/api";
import { createCharge, payCharge } from "../helpers/factories";
import { callTool, connectAgent } from "../mcp/client";
import { agentOn, merchantOn } from "./helpers";

// What an agent reads of its own payments, when its charges live in its merchants' shards.

describe("an agent's recent payments over shards", () => {
  it("lists the charges it paid in both shards, most recently paid first", async () => {
    const agent = await agentOn(0, { credit: 5_000 });
    const [m0, m1] = [await merchantOn(0), await merchantOn(1)];
    const paidIds: string[] = [];
    for (const [merchant, amount] of [
      [m1, 100],
      [m0, 200],
      [m1, 300],
    ] as const) {
      const charge = await createCharge(merchant.apiKey, amount);
      expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
      paidIds.push(charge.chargeId);
    }
    expect(paidIds.map(shardOfId)).toEqual([1, 0, 1]);
    // One left unpaid in shard 1 is not a payment.
    await createCharge(m1.apiKey, 400);

    const client = await connectAgent(agent.apiKey);
    const recent = await callTool(client, "list_recent_payments");
    expect(recent.isError, recent.text).toBe(false);
    const listed = (recent.body.charges as { chargeId: string; amountMinor: number }[]).map((c) => c.chargeId);
    expect(listed).toEqual([...paidIds].reverse());

    const two = await callTool(client, "list_recent_payments", { limit: 2 });
    expect((two.body.charges as { chargeId: string }[]).map((c) => c.chargeId)).toEqual(
      [...paidIds].reverse().slice(0, 2),
    );
  });
});

describe("a shard-1 agent's policy", () => {
  it("is written to its home row only, and the console's agent views read it there", async () => {
    const agent = await agentOn(1, { policy: { maxPerTransactionUsdCents: 500 } });
    const token = await consoleToken();
    const set = await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token,
      body: { maxPerTransactionUsdCents: 900 },
    });
    expect(set.status).toBe(200);
    expect(set.body.policy.maxPerTransactionUsdCents).toBe(900);

    const stored = async (shard: number) =>
      JSON.parse(
        (await dbOfShard(env, shard)
          .prepare("SELECT policy FROM agents WHERE id = ?")
          .bind(agent.agentId)
          .first<{ policy: string }>())!.policy,
      ).maxPerTransactionUsdCents;
    // One write: the control row keeps the policy it was created with, nothing reads it.
    expect([await stored(1), await stored(0)]).toEqual([900, 500]);

    const one = await api("GET", `/console/agents/${agent.agentId}`, { token });
    expect(one.body.policy).toEqual(set.body.policy);
    const listed = await api("GET", "/console/agents?limit=200", { token });
    const row = (listed.body.agents as { agentId: string; policy: unknown }[]).find((a) => a.agentId === agent.agentId);
    expect(row?.policy).toEqual(set.body.policy);
  });
});
