import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { dbOfShard } from "../../src/db/shards";
import { api, consoleToken } from "../helpers/api";
import { createCharge, createCheckoutLink, payCharge } from "../helpers/factories";
import { agentOn, merchantOn } from "./helpers";

/*
 * Where each keyed POST route keeps its Idempotency-Key and answer with two ledger shards, by the
 * one rule of the idempotency middleware (src/ledger/answers-place.ts): a request acting on money
 * keeps it with that money (the agent the path or a merchant's draw names, the acting agent, the
 * object the path's id names, the acting merchant), any other in control. The owners live on
 * shard 1 so that every answer kept with them is seen away from control.
 */

let n = 0;
const keyed = async (token: string, path: string, body?: unknown) => {
  const key = `home-${++n}-${crypto.randomUUID()}`;
  const res = await api("POST", path, { token, headers: { "idempotency-key": key }, ...(body ? { body } : {}) });
  return { key, status: res.status, body: res.body };
};

/** The shards holding a kept answer under `key` (its status), one expected. */
async function shardsKeeping(key: string) {
  const found: { shard: number; status: number }[] = [];
  for (const shard of [0, 1]) {
    const row = await dbOfShard(env, shard)
      .prepare("SELECT status, response_status AS responseStatus FROM idempotency_keys WHERE key = ?")
      .bind(key)
      .first<{ status: string; responseStatus: number }>();
    if (row) found.push({ shard, status: row.status === "done" ? row.responseStatus : -1 });
  }
  return found;
}

async function world() {
  const [merchant0, merchant1] = [await merchantOn(0), await merchantOn(1)];
  const agent = await agentOn(1, { credit: 10_000, policy: { approvalThresholdUsdCents: 1_000 } });
  return { merchant0, merchant1, agent, console: await consoleToken() };
}

describe("where a keyed request keeps its answer, two shards", () => {
  it("a request acting on money keeps it with that money", async () => {
    const { merchant0, merchant1, agent, console } = await world();
    const charge0 = await createCharge(merchant0.apiKey, 100);
    const link0 = await createCheckoutLink(merchant0.apiKey, 100);
    const paylink0 = await api("POST", "/merchant/paylinks", {
      token: merchant0.apiKey,
      body: { budgetUsdCents: 900 },
    });
    const code = paylink0.body.code as string;
    expect((await api("POST", `/pl/${code}/accept`, { token: agent.apiKey })).status).toBe(200);
    const heldCharge = await createCharge(merchant0.apiKey, 2_500);
    const held = await payCharge(agent.apiKey, heldCharge.chargeId);
    expect(held.status).toBe(402);
    const charge1 = await createCharge(merchant1.apiKey, 100);
    const cases: [string, () => ReturnType<typeof keyed>, number, number][] = [
      [
        "credit: the path's agent",
        () => keyed(console, `/console/agents/${agent.agentId}/credits`, { amountUsdCents: 5 }),
        1,
        200,
      ],
      [
        "credit: an unknown agent",
        () => keyed(console, "/console/agents/agent_unknown/credits", { amountUsdCents: 5 }),
        0,
        404,
      ],
      ["charge payment: the paying agent", () => keyed(agent.apiKey, `/charges/${charge0.chargeId}/pay`), 1, 200],
      ["checkout payment: the paying agent", () => keyed(agent.apiKey, `/checkout/${link0.checkoutToken}/pay`), 1, 200],
      [
        "draw: the agent its body names",
        () =>
          keyed(merchant0.apiKey, `/merchant/paylinks/${code}/charge`, { agentId: agent.agentId, amountUsdCents: 10 }),
        1,
        200,
      ],
      [
        "draw: an agent the directory does not know",
        () =>
          keyed(merchant0.apiKey, `/merchant/paylinks/${code}/charge`, {
            agentId: "agent_unknown",
            amountUsdCents: 10,
          }),
        0,
        409,
      ],
      [
        "grant: the approval's (the agent's home)",
        () => keyed(console, `/approvals/${held.body.approvalId}/grant`),
        1,
        200,
      ],
      ["refund: the charge's", () => keyed(merchant1.apiKey, `/merchant/charges/${charge1.chargeId}/refunds`), 1, 409],
      [
        "refund: an id of a shard not run here",
        () => keyed(merchant1.apiKey, "/merchant/charges/chg_s7_0123456789abcdefghjkmnpq/refunds"),
        0,
        404,
      ],
      ["charge: the merchant's", () => keyed(merchant1.apiKey, "/merchant/charges", { amountUsdCents: 100 }), 1, 201],
      ["PayLink: the merchant's", () => keyed(merchant1.apiKey, "/merchant/paylinks", { budgetUsdCents: 100 }), 1, 201],
      [
        "checkout link: the merchant's",
        () => keyed(merchant1.apiKey, "/merchant/checkout", { amountUsdCents: 100, description: "a report" }),
        1,
        201,
      ],
      ["payout: the merchant's", () => keyed(merchant1.apiKey, "/merchant/payouts"), 1, 409],
    ];
    for (const [what, request, shard, status] of cases) {
      const { key, status: answered } = await request();
      expect({ what, answered }).toEqual({ what, answered: status });
      expect({ what, kept: await shardsKeeping(key) }).toEqual({ what, kept: [{ shard, status }] });
    }
  });

  it("a request moving no money keeps it in control, whoever it names", async () => {
    const { merchant1, agent, console } = await world();
    const paylink = await api("POST", "/merchant/paylinks", { token: merchant1.apiKey, body: { budgetUsdCents: 900 } });
    const heldCharge = await createCharge(merchant1.apiKey, 2_500);
    const held = await payCharge(agent.apiKey, heldCharge.chargeId);
    expect(held.status).toBe(402);
    const cases: [string, () => ReturnType<typeof keyed>, number][] = [
      ["agent created", () => keyed(console, "/console/agents", { name: "another" }), 201],
      ["merchant created", () => keyed(console, "/merchants", { name: "Another" }), 201],
      ["agent key rolled", () => keyed(console, `/console/agents/${agent.agentId}/keys`), 201],
      ["agent frozen", () => keyed(console, `/console/agents/${agent.agentId}/freeze`), 200],
      ["agent unfrozen", () => keyed(console, `/console/agents/${agent.agentId}/unfreeze`), 200],
      ["PayLink accepted", () => keyed(agent.apiKey, `/pl/${paylink.body.code}/accept`), 200],
      ["approval rejected", () => keyed(console, `/approvals/${held.body.approvalId}/reject`), 200],
    ];
    for (const [what, request, status] of cases) {
      const { key, status: answered } = await request();
      expect({ what, answered }).toEqual({ what, answered: status });
      expect({ what, kept: await shardsKeeping(key) }).toEqual({ what, kept: [{ shard: 0, status }] });
    }
  });
});
