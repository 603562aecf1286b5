import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, creditAgent, payCharge } from "../helpers/factories";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const NO_LIMITS = {
  maxPerTransactionUsdCents: null,
  dailyLimitUsdCents: null,
  allowedCategories: null,
  approvalThresholdUsdCents: null,
  allowedX402Hosts: null,
};

describe("POST /console/agents", () => {
  it("201 with agentId, a svc_sk_ key shown once and a policy with all four fields null when absent", async () => {
    const res = await api("POST", "/console/agents", { token: await consoleToken(), body: { name: "buyer-1" } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["agentId", "apiKey", "depositAddress", "policy"]);
    expect(res.body.depositAddress).toMatch(/^0x[0-9a-f]{40}$/);
    expect(res.body.agentId).toMatch(/^agent_[0-9a-z]+$/);
    expect(res.body.apiKey).toMatch(/^svc_sk_[A-Za-z0-9_-]{20,}$/);
    expect(res.body.policy).toEqual(NO_LIMITS);
    // Only the hash is stored.
    const row = await env.DB.prepare("SELECT api_key_hash AS h FROM agents WHERE id = ?")
      .bind(res.body.agentId)
      .first<{ h: string }>();
    expect(row!.h).not.toContain(res.body.apiKey);
    expect(row!.h).not.toBe(res.body.apiKey);
    // The key works as the agent's identity.
    const bal = await api("GET", "/balance", { token: res.body.apiKey });
    expect(bal.body.agentId).toBe(res.body.agentId);
  });

  it("returns the given policy, filling absent fields with null", async () => {
    const res = await api("POST", "/console/agents", {
      token: await consoleToken(),
      body: { name: "limited", policy: { maxPerTransactionUsdCents: 500, allowedCategories: ["data"] } },
    });
    expect(res.status).toBe(201);
    expect(res.body.policy).toEqual({ ...NO_LIMITS, maxPerTransactionUsdCents: 500, allowedCategories: ["data"] });
  });

  it("returns a full policy unchanged", async () => {
    const policy = {
      maxPerTransactionUsdCents: 1000,
      dailyLimitUsdCents: 5000,
      allowedCategories: ["data", "compute"],
      approvalThresholdUsdCents: 700,
      allowedX402Hosts: ["api.example", "*"],
    };
    const res = await api("POST", "/console/agents", { token: await consoleToken(), body: { name: "full", policy } });
    expect(res.status).toBe(201);
    expect(res.body.policy).toEqual(policy);
  });

  it.each([
    ["missing name", {}],
    ["empty name", { name: "  " }],
    ["unknown field", { name: "x", color: "red" }],
    ["invalid policy", { name: "x", policy: { maxPerTransactionUsdCents: -1 } }],
  ])("400 invalid_request for %s", async (_label, body) => {
    const res = await api("POST", "/console/agents", { token: await consoleToken(), body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });

  it("requires a console session", async () => {
    const res = await api("POST", "/console/agents", { body: { name: "x" } });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe("console_session_required");
  });
});

describe("GET /console/agents and /console/agents/:agentId", () => {
  it("the list includes the agent in the console shape", async () => {
    const agent = await createAgent({ name: "listed", policy: { dailyLimitUsdCents: 9000 }, credit: 1234 });
    const res = await api("GET", "/console/agents", { token: await consoleToken() });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body.agents)).toBe(true);
    const found = res.body.agents.find((a: { agentId: string }) => a.agentId === agent.agentId);
    expect(found).toBeDefined();
    expect(Object.keys(found).sort()).toEqual([
      "agentId",
      "balanceBaseUnits",
      "balanceMinor",
      "createdAt",
      "currency",
      "depositAddress",
      "frozen",
      "frozenReason",
      "name",
      "policy",
    ]);
    expect(found).toMatchObject({
      name: "listed",
      balanceMinor: 1234,
      balanceBaseUnits: "12340000",
      currency: "USD",
      policy: { ...NO_LIMITS, dailyLimitUsdCents: 9000 },
    });
    expect(found.createdAt).toMatch(ISO);
    // No key material in the list.
    expect(JSON.stringify(res.body)).not.toContain(agent.apiKey);
  });

  it("one agent in the same shape", async () => {
    const agent = await createAgent({ name: "single", credit: 50 });
    const res = await api("GET", `/console/agents/${agent.agentId}`, { token: await consoleToken() });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([
      "agentId",
      "balanceBaseUnits",
      "balanceMinor",
      "createdAt",
      "currency",
      "depositAddress",
      "frozen",
      "frozenReason",
      "name",
      "policy",
    ]);
    expect(res.body).toMatchObject({
      agentId: agent.agentId,
      name: "single",
      balanceMinor: 50,
      balanceBaseUnits: "500000",
      currency: "USD",
      policy: NO_LIMITS,
    });
    expect(res.body.createdAt).toMatch(ISO);
  });

  it("404 for an unknown agent", async () => {
    const res = await api("GET", "/console/agents/agent_doesnotexist00000000", { token: await consoleToken() });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: "agent_not_found" });
  });
});

describe("PUT /console/agents/:agentId/policy", () => {
  it("200 { policy } normalized, stored, and effective on the next payment", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const token = await consoleToken();
    const c1 = await createCharge(merchant.apiKey, 600);
    expect((await payCharge(agent.apiKey, c1.chargeId)).status).toBe(200);

    const put = await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token,
      body: { maxPerTransactionUsdCents: 500 },
    });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ policy: { ...NO_LIMITS, maxPerTransactionUsdCents: 500 } });
    const read = await api("GET", `/console/agents/${agent.agentId}`, { token });
    expect(read.body.policy).toEqual({ ...NO_LIMITS, maxPerTransactionUsdCents: 500 });

    const c2 = await createCharge(merchant.apiKey, 600);
    const refused = await payCharge(agent.apiKey, c2.chargeId);
    expect(refused.status).toBe(402);
    expect(refused.body.error).toBe("excede_tope_por_transaccion");

    // Replacing the policy with an empty one lifts the limit.
    const cleared = await api("PUT", `/console/agents/${agent.agentId}/policy`, { token, body: {} });
    expect(cleared.status).toBe(200);
    expect(cleared.body.policy).toEqual(NO_LIMITS);
    expect((await payCharge(agent.apiKey, c2.chargeId)).status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(10_000 - 1200);
  });

  it("an approval threshold set by PUT holds the next payment", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const put = await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token: await consoleToken(),
      body: { approvalThresholdUsdCents: 100 },
    });
    expect(put.status).toBe(200);
    const charge = await createCharge(merchant.apiKey, 101);
    const res = await payCharge(agent.apiKey, charge.chargeId);
    expect(res.status).toBe(402);
    expect(res.body.pendingApproval).toBe(true);
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
  });

  it.each([
    ["negative cap", { maxPerTransactionUsdCents: -5 }],
    ["zero cap", { maxPerTransactionUsdCents: 0 }],
    ["fractional daily limit", { dailyLimitUsdCents: 10.5 }],
    ["string cap", { maxPerTransactionUsdCents: "500" }],
    ["categories not an array", { allowedCategories: "data" }],
    ["empty category string", { allowedCategories: [""] }],
    ["non-string category", { allowedCategories: [1] }],
    ["negative approval threshold", { approvalThresholdUsdCents: -1 }],
    ["unknown field", { weeklyLimitUsdCents: 100 }],
    ["not an object", [1, 2]],
  ])("400 invalid_request for %s, and the stored policy is unchanged", async (_label, body) => {
    const agent = await createAgent({ policy: { maxPerTransactionUsdCents: 777 } });
    const token = await consoleToken();
    const res = await api("PUT", `/console/agents/${agent.agentId}/policy`, { token, body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    const read = await api("GET", `/console/agents/${agent.agentId}`, { token });
    expect(read.body.policy).toEqual({ ...NO_LIMITS, maxPerTransactionUsdCents: 777 });
  });

  it("400 for malformed JSON", async () => {
    const agent = await createAgent();
    const res = await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token: await consoleToken(),
      body: "{not json",
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });

  it("404 for an unknown agent", async () => {
    const res = await api("PUT", "/console/agents/agent_doesnotexist00000000/policy", {
      token: await consoleToken(),
      body: { maxPerTransactionUsdCents: 1 },
    });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("agent_not_found");
  });
});

describe("POST /console/agents/:agentId/credits", () => {
  it("200 { balanceMinor } that accumulates", async () => {
    const agent = await createAgent();
    const token = await consoleToken();
    const r1 = await api("POST", `/console/agents/${agent.agentId}/credits`, { token, body: { amountUsdCents: 1000 } });
    expect(r1.status).toBe(200);
    expect(r1.body).toEqual({ balanceMinor: 1000 });
    const r2 = await api("POST", `/console/agents/${agent.agentId}/credits`, {
      token,
      body: { amountUsdCents: 250, reference: "wire-42" },
    });
    expect(r2.status).toBe(200);
    expect(r2.body).toEqual({ balanceMinor: 1250 });
    expect(await balanceOf(agent.apiKey)).toBe(1250);
    const read = await api("GET", `/console/agents/${agent.agentId}`, { token });
    expect(read.body.balanceMinor).toBe(1250);
  });

  it.each([
    ["zero", { amountUsdCents: 0 }],
    ["negative", { amountUsdCents: -100 }],
    ["fractional", { amountUsdCents: 0.5 }],
    ["string", { amountUsdCents: "100" }],
    ["missing", {}],
  ])("400 invalid_request for a %s amount and the balance is unchanged", async (_label, body) => {
    const agent = await createAgent({ credit: 300 });
    const res = await api("POST", `/console/agents/${agent.agentId}/credits`, { token: await consoleToken(), body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    expect(await balanceOf(agent.apiKey)).toBe(300);
  });

  it("404 for an unknown agent, and nothing is written", async () => {
    const id = "agent_doesnotexist00000000";
    const res = await api("POST", `/console/agents/${id}/credits`, {
      token: await consoleToken(),
      body: { amountUsdCents: 100 },
    });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("agent_not_found");
    const entries = await env.DB.prepare("SELECT COUNT(*) AS n FROM ledger_entries WHERE account = ?")
      .bind(`agent:${id}`)
      .first<{ n: number }>();
    expect(entries!.n).toBe(0);
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE agent_id = ?")
      .bind(id)
      .first<{ n: number }>();
    expect(audit!.n).toBe(0);
  });

  it("is written to the audit chain as agent.credited", async () => {
    const agent = await createAgent();
    const token = await consoleToken();
    await api("POST", `/console/agents/${agent.agentId}/credits`, { token, body: { amountUsdCents: 700 } });
    await api("POST", `/console/agents/${agent.agentId}/credits`, {
      token,
      body: { amountUsdCents: 50, reference: "topup-7" },
    });
    const { results } = await env.DB.prepare(
      "SELECT seq, type, agent_id AS agentId, amount_minor AS amountMinor, currency, reference, data FROM audit_events WHERE agent_id = ? ORDER BY seq",
    )
      .bind(agent.agentId)
      .all<{
        seq: number;
        type: string;
        agentId: string;
        amountMinor: number;
        currency: string;
        reference: string;
        data: string;
      }>();
    expect(results).toHaveLength(2);
    expect(results.map((r) => r.type)).toEqual(["agent.credited", "agent.credited"]);
    expect(results.map((r) => r.amountMinor)).toEqual([700, 50]);
    expect(results[1]!.seq).toBeGreaterThan(results[0]!.seq);
    for (const r of results) {
      expect(r.currency).toBe("USD");
      expect(r.reference).toBeTruthy();
      expect(JSON.parse(r.data).by).toBe("ops@example.com");
    }
    expect(JSON.parse(results[1]!.data).externalReference).toBe("topup-7");
    // The ledger records the same money: external -> agent.
    const sum = await env.DB.prepare("SELECT SUM(amount_minor) AS s FROM ledger_entries WHERE account = ?")
      .bind(`agent:${agent.agentId}`)
      .first<{ s: number }>();
    expect(sum!.s).toBe(750);
    const verify = await api("GET", "/console/audit/verify", { token });
    expect(verify.body.ok).toBe(true);
  });
});

describe("GET /balance", () => {
  it("200 { agentId, balanceMinor, currency } for the calling agent", async () => {
    const agent = await createAgent({ credit: 4200 });
    const res = await api("GET", "/balance", { token: agent.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      agentId: agent.agentId,
      balanceMinor: 4200,
      balanceBaseUnits: "42000000",
      currency: "USD",
      depositAddress: expect.stringMatching(/^0x[0-9a-f]{40}$/),
      frozen: false,
    });
  });

  it("reflects payments", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    await creditAgent(agent.agentId, 1);
    const charge = await createCharge(merchant.apiKey, 401);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    const res = await api("GET", "/balance", { token: agent.apiKey });
    expect(res.body).toEqual({
      agentId: agent.agentId,
      balanceMinor: 600,
      balanceBaseUnits: "6000000",
      currency: "USD",
      depositAddress: expect.stringMatching(/^0x[0-9a-f]{40}$/),
      frozen: false,
    });
  });

  it("401 without an agent key, 403 with a merchant key", async () => {
    const none = await api("GET", "/balance");
    expect(none.status).toBe(401);
    expect(none.body.error).toBe("agent_api_key_required");
    const merchant = await createMerchant();
    const wrong = await api("GET", "/balance", { token: merchant.apiKey });
    expect(wrong.status).toBe(403);
  });
});
