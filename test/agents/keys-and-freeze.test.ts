import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type ApiResponse, api, consoleToken, OPS_EMAIL } from "../helpers/api";
import {
  balanceOf,
  createAgent,
  createCharge,
  createCheckoutLink,
  createMerchant,
  merchantBalance,
  payCharge,
} from "../helpers/factories";
import { callTool, connectAgent } from "../mcp/client";

/*
 * Keys and kill switches: a key rolled (with a grace, or none) and an agent frozen take effect on
 * every route within 5 seconds, whatever an isolate remembers; a freeze never races a payment into
 * the ledger; each roll, freeze and unfreeze is an audit row naming the console user.
 */
const EFFECT_WITHIN_MS = 5_000;

const roll = async (kind: "agents" | "merchants", id: string, body?: unknown) =>
  api("POST", `/console/${kind}/${id}/keys`, { token: await consoleToken(), ...(body === undefined ? {} : { body }) });
const freeze = async (agentId: string, reason?: string) =>
  api("POST", `/console/agents/${agentId}/freeze`, { token: await consoleToken(), body: reason ? { reason } : {} });
const unfreeze = async (agentId: string) =>
  api("POST", `/console/agents/${agentId}/unfreeze`, { token: await consoleToken() });

async function createPaylink(merchantKey: string) {
  const res = await api("POST", "/merchant/paylinks", { token: merchantKey, body: { budgetUsdCents: 1000 } });
  expect(res.status).toBe(201);
  return res.body.code as string;
}

/** Calls `call` until `done` holds for its answer, for at most the promised 5 s; the answers seen, last one last. */
async function within5s(
  call: () => Promise<ApiResponse[]>,
  done: (answers: ApiResponse[]) => boolean,
): Promise<ApiResponse[]> {
  const deadline = Date.now() + EFFECT_WITHIN_MS;
  for (;;) {
    const answers = await call();
    if (done(answers)) return answers;
    if (Date.now() > deadline) return answers;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Every agent route, as the agent with `key` calls it (each refusal before anything moves). */
const agentRoutes = (key: string, chargeId: string, token: string, code: string) => () =>
  Promise.all([
    api("GET", "/balance", { token: key }),
    api("POST", `/charges/${chargeId}/pay`, { token: key }),
    api("POST", `/checkout/${token}/pay`, { token: key }),
    api("POST", `/pl/${code}/accept`, { token: key }),
    api("POST", "/mcp", {
      token: key,
      headers: { accept: "application/json, text/event-stream" },
      body: { jsonrpc: "2.0", id: 1, method: "tools/list" },
    }),
  ]);

const auditRows = (type: string, column: "agent_id" | "merchant_id", id: string) =>
  env.DB.prepare(`SELECT seq, data FROM audit_events WHERE type = ? AND ${column} = ? ORDER BY seq`)
    .bind(type, id)
    .all<{ seq: number; data: string }>();

describe("rolling keys", () => {
  it("grace 0: the old agent key answers 401 on every route within 5 s, the new one works at once; audited, only the hash kept", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000, policy: { approvalThresholdUsdCents: 10 } });
    // Unknown charge, a paid-for link, a PayLink: the routes still answer 401 for a bad key before looking.
    const [link, code] = [
      (await createCheckoutLink(merchant.apiKey, 1, "kill switch")).checkoutToken,
      await createPaylink(merchant.apiKey),
    ];
    const oldRoutes = agentRoutes(agent.apiKey, "chg_doesnotexist", link, code);
    expect((await oldRoutes()).map((r) => r.status)).not.toContain(401); // the old key is remembered now

    const rolled = await roll("agents", agent.agentId, { graceSeconds: 0 });
    expect(rolled.status).toBe(201);
    expect(rolled.body).toEqual({
      agentId: agent.agentId,
      apiKey: expect.stringMatching(/^svc_sk_[A-Za-z0-9_-]{43}$/),
      previousKeyExpiresAt: expect.any(String),
    });
    expect(Date.parse(rolled.body.previousKeyExpiresAt)).toBeLessThanOrEqual(Date.now());
    expect((await api("GET", "/balance", { token: rolled.body.apiKey })).body).toMatchObject({
      agentId: agent.agentId,
      frozen: false,
    });

    const answers = await within5s(oldRoutes, (all) => all.every((r) => r.status === 401));
    expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    expect(answers[0]!.body).toEqual({ error: "agent_api_key_required" });
    const paid = await payCharge(rolled.body.apiKey, (await createCharge(merchant.apiKey, 5)).chargeId);
    expect(paid.status).toBe(200);

    const stored = await env.DB.prepare(
      "SELECT api_key_hash AS hash, previous_api_key_hash AS previous FROM agents WHERE id = ?",
    )
      .bind(agent.agentId)
      .first<{ hash: string; previous: string }>();
    const hex = async (key: string) =>
      [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key)))]
        .map((b) => b.toString(16).padStart(2, "0"))
        .join("");
    expect(stored).toEqual({ hash: await hex(rolled.body.apiKey), previous: await hex(agent.apiKey) });
    const audit = await auditRows("agent.key_rolled", "agent_id", agent.agentId);
    expect(audit.results.map((r) => JSON.parse(r.data))).toEqual([
      { by: OPS_EMAIL, graceSeconds: 0, previousKeyExpiresAt: rolled.body.previousKeyExpiresAt },
    ]);
    expect(JSON.stringify(audit.results)).not.toContain(rolled.body.apiKey);
  });

  it("with a grace both keys work until it ends, then the old one answers 401 (within 5 s); the default grace is a day", async () => {
    const agent = await createAgent({ credit: 100 });
    const rolled = await roll("agents", agent.agentId, { graceSeconds: 2 });
    expect(rolled.status).toBe(201);
    const ends = Date.parse(rolled.body.previousKeyExpiresAt);
    // The old key works while its grace lasts (read again, so an isolate that remembers it is asked
    // too). On a loaded machine an answer can come back after the end: only then may it be a 401.
    const oldKeyWorks = async () => {
      const status = (await api("GET", "/balance", { token: agent.apiKey })).status;
      if (Date.now() < ends) expect(status).toBe(200);
    };
    await oldKeyWorks();
    expect((await api("GET", "/balance", { token: rolled.body.apiKey })).status).toBe(200);
    while (Date.now() < ends - 500) {
      await oldKeyWorks();
      await new Promise((r) => setTimeout(r, 250));
    }
    await new Promise((r) => setTimeout(r, Math.max(0, ends - Date.now())));
    const [after] = await within5s(
      async () => [await api("GET", "/balance", { token: agent.apiKey })],
      ([r]) => r!.status === 401,
    );
    expect(after!.status).toBe(401);
    expect((await api("GET", "/balance", { token: rolled.body.apiKey })).status).toBe(200);

    // No body: a day's grace.
    const dayRoll = await roll("agents", agent.agentId);
    expect(dayRoll.status).toBe(201);
    const grace = Date.parse(dayRoll.body.previousKeyExpiresAt) - Date.now();
    expect(grace).toBeGreaterThan(86_400_000 - 60_000);
    expect(grace).toBeLessThanOrEqual(86_400_000);
  });

  it("rolling twice ends the oldest key at once (at most two keys work), whatever its grace", async () => {
    const agent = await createAgent();
    const first = await roll("agents", agent.agentId, { graceSeconds: 3600 });
    const second = await roll("agents", agent.agentId, { graceSeconds: 3600 });
    expect([first.status, second.status]).toEqual([201, 201]);
    const [oldest] = await within5s(
      async () => [await api("GET", "/balance", { token: agent.apiKey })],
      ([r]) => r!.status === 401,
    );
    expect(oldest!.status).toBe(401);
    for (const key of [first.body.apiKey, second.body.apiKey])
      expect((await api("GET", "/balance", { token: key })).status).toBe(200);
  });

  it("a merchant key: rolled with grace 0, the old one answers 401 within 5 s, the new one opens only its own merchant", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    const otherCharge = await createCharge(other.apiKey, 50);
    expect((await api("GET", "/merchant/me", { token: merchant.apiKey })).status).toBe(200);
    const rolled = await roll("merchants", merchant.merchantId, { graceSeconds: 0 });
    expect(rolled.status).toBe(201);
    expect(rolled.body).toEqual({
      merchantId: merchant.merchantId,
      apiKey: expect.stringMatching(/^sk_mch_[A-Za-z0-9_-]{43}$/),
      previousKeyExpiresAt: expect.any(String),
    });
    const oldRoutes = async () => [
      await api("GET", "/merchant/me", { token: merchant.apiKey }),
      await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 1 } }),
    ];
    const answers = await within5s(oldRoutes, (all) => all.every((r) => r.status === 401));
    expect(answers.map((r) => r.status)).toEqual([401, 401]);
    expect(answers[0]!.body).toEqual({ error: "merchant_api_key_required" });
    const me = await api("GET", "/merchant/me", { token: rolled.body.apiKey });
    expect(me.body.merchant.id).toBe(merchant.merchantId);
    // Never another merchant's objects.
    const listed = await api("GET", "/merchant/charges", { token: rolled.body.apiKey });
    expect(listed.body.charges.map((c: { chargeId: string }) => c.chargeId)).not.toContain(otherCharge.chargeId);
    const audit = await auditRows("merchant.key_rolled", "merchant_id", merchant.merchantId);
    expect(audit.results).toHaveLength(1);
    expect(JSON.parse(audit.results[0]!.data)).toMatchObject({ by: OPS_EMAIL, graceSeconds: 0 });
  });

  it("refusals: unknown holder 404, a grace outside 0-604,800 or not a whole number 400, only a console session may roll", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent();
    expect((await roll("agents", "agent_doesnotexist", { graceSeconds: 0 })).body).toEqual({
      error: "agent_not_found",
    });
    expect((await roll("merchants", "mch_doesnotexist", { graceSeconds: 0 })).status).toBe(404);
    for (const graceSeconds of [-1, 604_801, 1.5, "60"])
      expect((await roll("agents", agent.agentId, { graceSeconds })).status).toBe(400);
    expect((await roll("agents", agent.agentId, { graceSeconds: 0, other: 1 })).status).toBe(400);
    expect(
      (await api("POST", `/console/agents/${agent.agentId}/keys`, { token: merchant.apiKey, body: {} })).status,
    ).toBe(403);
    expect((await api("POST", `/console/agents/${agent.agentId}/keys`, { token: agent.apiKey, body: {} })).status).toBe(
      403,
    );
    expect((await api("POST", `/console/merchants/${merchant.merchantId}/keys`, { body: {} })).status).toBe(401);
    // Nothing was rolled by any of these.
    expect((await api("GET", "/balance", { token: agent.apiKey })).status).toBe(200);
    expect((await auditRows("agent.key_rolled", "agent_id", agent.agentId)).results).toHaveLength(0);
  });
});

describe("freezing an agent", () => {
  it("a freeze racing 20 payments: every 200 landed before the freeze in the ledger's order, none after; the rest are refused and move nothing", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const charges = await Promise.all(Array.from({ length: 20 }, () => createCharge(merchant.apiKey, 7)));
    // Payments go out every 15 ms; the freeze as soon as the first is answered, while the others are on their way.
    const sentAt: number[] = [];
    const payments = charges.map((c, i) =>
      new Promise((r) => setTimeout(r, i * 15)).then(() => {
        sentAt[i] = Date.now();
        return payCharge(agent.apiKey, c.chargeId);
      }),
    );
    const frozen = Promise.race(payments).then(async () => {
      const answer = await freeze(agent.agentId, "racing");
      return { answer, at: Date.now() };
    });
    const [answers, freezing] = await Promise.all([Promise.all(payments), frozen]);
    expect(freezing.answer.status).toBe(200);
    // One was paid before the freeze was even sent; every payment sent after the freeze was answered is refused.
    expect(answers.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(1);
    for (const [i, r] of answers.entries()) if (sentAt[i]! > freezing.at) expect(r.status).toBe(403);

    const paid = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    for (const r of refused) expect(r).toMatchObject({ status: 403, body: { error: "agent_frozen" } });
    const [freezeRow] = (await auditRows("agent.frozen", "agent_id", agent.agentId)).results;
    const payRows = await env.DB.prepare(
      "SELECT seq, charge_id AS chargeId FROM audit_events WHERE type = 'charge.paid' AND agent_id = ?",
    )
      .bind(agent.agentId)
      .all<{ seq: number; chargeId: string }>();
    expect(payRows.results.map((r) => r.chargeId).sort()).toEqual(paid.map((r) => r.body.charge.chargeId).sort());
    for (const row of payRows.results) expect(row.seq).toBeLessThan(freezeRow!.seq);
    expect(await balanceOf(agent.apiKey)).toBe(10_000 - 7 * paid.length);
    expect(await merchantBalance(merchant.apiKey)).toBe(7 * paid.length);
    for (const [i, r] of answers.entries()) {
      const charge = (await api("GET", `/charges/${charges[i]!.chargeId}`)).body;
      expect(charge.status).toBe(r.status === 200 ? "paid" : "pending");
    }
    expect(JSON.parse(freezeRow!.data)).toEqual({ by: OPS_EMAIL, reason: "racing" });
  });

  it("frozen, every path refuses with the section's status and nothing moves; reads keep working; unfrozen, it pays again", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000, policy: { approvalThresholdUsdCents: 100 } });
    const link = (await createCheckoutLink(merchant.apiKey, 20, "kill switch")).checkoutToken;
    const code = await createPaylink(merchant.apiKey);
    expect((await api("POST", `/pl/${code}/accept`, { token: agent.apiKey })).status).toBe(200);
    // A payment held for a human before the freeze.
    const big = await createCharge(merchant.apiKey, 500);
    const held = await payCharge(agent.apiKey, big.chargeId);
    expect(held.status).toBe(402);
    const approvalId = held.body.approvalId as string;

    const frozen = await freeze(agent.agentId, "model misbehaving");
    expect(frozen.body).toEqual({ agentId: agent.agentId, frozen: true });
    const charge = await createCharge(merchant.apiKey, 20);
    const otherCode = await createPaylink(merchant.apiKey);
    const console = await consoleToken();
    expect(await payCharge(agent.apiKey, charge.chargeId)).toMatchObject({
      status: 403,
      body: { error: "agent_frozen" },
    });
    expect(await api("POST", `/checkout/${link}/pay`, { token: agent.apiKey })).toMatchObject({
      status: 403,
      body: { error: "agent_frozen" },
    });
    expect(await api("POST", `/pl/${otherCode}/accept`, { token: agent.apiKey })).toMatchObject({
      status: 403,
      body: { error: "agent_frozen" },
    });
    expect(await api("POST", `/pl/${code}/accept`, { token: agent.apiKey })).toMatchObject({
      status: 403,
      body: { error: "agent_frozen" },
    });
    expect(
      await api("POST", `/merchant/paylinks/${code}/charge`, {
        token: merchant.apiKey,
        body: { agentId: agent.agentId, amountUsdCents: 5 },
      }),
    ).toMatchObject({ status: 409, body: { error: "agent_frozen" } });
    expect(await api("POST", `/approvals/${approvalId}/grant`, { token: console })).toMatchObject({
      status: 409,
      body: { error: "agent_frozen" },
    });
    const mcp = await connectAgent(agent.apiKey);
    for (const [tool, args] of [
      ["pay_charge", { chargeId: charge.chargeId }],
      ["pay_checkout_link", { token: link }],
      ["accept_paylink", { code: otherCode }],
    ] as const) {
      const result = await callTool(mcp, tool, args);
      expect(result.isError).toBe(true);
      expect(result.body).toMatchObject({ error: "agent_frozen", status: 403 });
    }
    await mcp.close();

    // Nothing moved; the approval waits; the reads answer, frozen shown.
    expect(await balanceOf(agent.apiKey)).toBe(5000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
    expect((await api("GET", `/charges/${big.chargeId}`)).body.status).toBe("pending");
    const approval = await env.DB.prepare("SELECT status FROM approvals WHERE id = ?")
      .bind(approvalId)
      .first<{ status: string }>();
    expect(approval?.status).toBe("pending");
    expect(
      await env.DB.prepare(
        "SELECT COUNT(*) AS n FROM charges WHERE checkout_link_id = (SELECT id FROM checkout_links WHERE token = ?)",
      )
        .bind(link)
        .first(),
    ).toEqual({ n: 0 });
    expect((await api("GET", "/balance", { token: agent.apiKey })).body).toMatchObject({
      balanceMinor: 5000,
      frozen: true,
    });
    const listed = (await api("GET", "/console/agents?limit=500", { token: console })).body.agents.find(
      (a: { agentId: string }) => a.agentId === agent.agentId,
    );
    expect(listed).toMatchObject({ frozen: true, frozenReason: "model misbehaving" });
    expect((await api("GET", `/console/agents/${agent.agentId}`, { token: console })).body).toMatchObject({
      frozen: true,
    });

    // Freezing again changes nothing and writes no second row.
    expect((await freeze(agent.agentId)).body).toEqual({ agentId: agent.agentId, frozen: true });
    expect((await auditRows("agent.frozen", "agent_id", agent.agentId)).results).toHaveLength(1);

    const thawed = await unfreeze(agent.agentId);
    expect(thawed.body).toEqual({ agentId: agent.agentId, frozen: false });
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    expect((await api("POST", `/approvals/${approvalId}/grant`, { token: console })).status).toBe(200);
    expect((await api("GET", "/balance", { token: agent.apiKey })).body).toMatchObject({
      balanceMinor: 5000 - 520,
      frozen: false,
    });
    const unfrozenRows = await auditRows("agent.unfrozen", "agent_id", agent.agentId);
    expect(unfrozenRows.results.map((r) => JSON.parse(r.data))).toEqual([{ by: OPS_EMAIL }]);
    expect((await unfreeze(agent.agentId)).body).toEqual({ agentId: agent.agentId, frozen: false });
    expect((await auditRows("agent.unfrozen", "agent_id", agent.agentId)).results).toHaveLength(1);
    const verify = await api("GET", "/console/audit/verify", { token: console });
    expect(verify.body.ok).toBe(true);
  });

  it("refusals: unknown agent 404, a reason over 200 characters 400, only a console session", async () => {
    const agent = await createAgent();
    expect((await freeze("agent_doesnotexist")).body).toEqual({ error: "agent_not_found" });
    expect((await unfreeze("agent_doesnotexist")).status).toBe(404);
    expect((await freeze(agent.agentId, "x".repeat(201))).status).toBe(400);
    // Unfreeze takes no body: one with anything in it is refused, not ignored (and unfreezes nothing).
    expect((await freeze(agent.agentId)).status).toBe(200);
    for (const body of [{ x: 1 }, "garbage"])
      expect(
        (await api("POST", `/console/agents/${agent.agentId}/unfreeze`, { token: await consoleToken(), body })).status,
      ).toBe(400);
    const utf16 = await api("POST", `/console/agents/${agent.agentId}/unfreeze`, {
      token: await consoleToken(),
      body: "{}",
      headers: { "content-type": "application/json; charset=utf-16" },
    });
    expect(utf16.status).toBe(415);
    expect((await api("GET", "/balance", { token: agent.apiKey })).body.frozen).toBe(true);
    expect((await unfreeze(agent.agentId)).body).toEqual({ agentId: agent.agentId, frozen: false });
    expect(
      (await api("POST", `/console/agents/${agent.agentId}/freeze`, { token: agent.apiKey, body: {} })).status,
    ).toBe(403);
    expect((await api("POST", `/console/agents/${agent.agentId}/freeze`, { body: {} })).status).toBe(401);
    expect((await api("GET", "/balance", { token: agent.apiKey })).body.frozen).toBe(false);
  });
});
