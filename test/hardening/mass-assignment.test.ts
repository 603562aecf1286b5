import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { normalizePolicy } from "../../src/agents/policy";
import { createAgent as createAgentRow } from "../../src/agents/service";
import { buildApp } from "../../src/app";
import { dbOf } from "../../src/db/client";
import { registerMerchant } from "../../src/merchants/service";
import { consoleToken } from "../helpers/api";
import { receiverUrl } from "../helpers/webhooks";

/**
 * Issue #7, mass assignment: every create and update body is strict, so an
 * unknown field is 400 invalid_request and nobody can set balanceMinor,
 * status, merchantId, agentId, method, reference, paidAt, apiKeyHash and the
 * like. After each refusal the rows the request could have touched are read
 * again and must be exactly as before; a control request without the field
 * then succeeds and does change them, which proves the check can see a change.
 *
 * The app is called directly (not through the loopback binding), so the many
 * requests here stay fast.
 */

const app = buildApp();
const ctx = {
  waitUntil: () => undefined,
  passThroughOnException: () => undefined,
  props: {},
} as unknown as ExecutionContext;

interface Reply {
  status: number;
  text: string;
  body: any;
}

async function call(method: string, path: string, token: string, body: unknown): Promise<Reply> {
  const res = await app.fetch(
    new Request(`http://service.test${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
    env,
    ctx,
  );
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // left as text; the assertions below will say so
  }
  return { status: res.status, text, body: parsed };
}

/** Rows as D1 returns them, for before/after comparisons. */
const rows = async (sql: string, ...params: unknown[]) =>
  (
    await env.DB.prepare(sql)
      .bind(...params)
      .all()
  ).results;

const RUN = crypto.randomUUID().slice(0, 8);

let consoleKey = "";
let a: { merchantId: string; apiKey: string };
let b: { merchantId: string; apiKey: string };
let x: { agentId: string; apiKey: string };
let y: { agentId: string; apiKey: string };
let linkToken = "";

beforeAll(async () => {
  consoleKey = await consoleToken();
  const _db = dbOf(env.DB);
  a = await registerMerchant(env, env.DB, { name: `mass-assign A ${RUN}`, category: "data" });
  b = await registerMerchant(env, env.DB, { name: `mass-assign B ${RUN}`, category: "data" });
  x = await createAgentRow(env, env.DB, {
    name: `mass-assign X ${RUN}`,
    policy: normalizePolicy({ dailyLimitUsdCents: 5000 }),
  });
  y = await createAgentRow(env, env.DB, { name: `mass-assign Y ${RUN}`, policy: normalizePolicy(undefined) });
  const credited = await call("POST", `/console/agents/${x.agentId}/credits`, consoleKey, { amountUsdCents: 700 });
  if (credited.status !== 200) throw new Error(`credit: ${credited.status} ${credited.text}`);
  const link = await call("POST", "/merchant/checkout", a.apiKey, {
    amountUsdCents: 250,
    description: "mass-assignment link",
  });
  if (link.status !== 201) throw new Error(`checkout link: ${link.status} ${link.text}`);
  linkToken = link.body.checkoutToken;
});

/**
 * Sends `base` plus each unknown field in turn; each must be 400
 * invalid_request naming an unrecognized key, must not echo the value, and
 * must leave `snapshot()` unchanged. Then `base` alone must be accepted with
 * `okStatus`, and must change `snapshot()`, which shows the check would have
 * seen a change had a refused request made one.
 */
async function expectRefusedThenControl(options: {
  method: string;
  path: () => string;
  token: () => string;
  base: Record<string, unknown>;
  unknown: Record<string, unknown>;
  snapshot: () => Promise<unknown>;
  okStatus: number;
  /** For updates whose control leaves the rows as they were (idempotent set): skip the "control changes state" check. */
  controlChangesState?: boolean;
}) {
  const before = await options.snapshot();
  for (const [field, value] of Object.entries(options.unknown)) {
    const label = `${options.method} ${options.path()} with ${JSON.stringify(field)}`;
    const res = await call(options.method, options.path(), options.token(), { ...options.base, [field]: value });
    expect(res.status, `${label}: ${res.text}`).toBe(400);
    expect(res.body?.error, label).toBe("invalid_request");
    expect(
      res.body.issues.some((i: { code: string }) => i.code === "unrecognized_keys"),
      `${label}: ${res.text}`,
    ).toBe(true);
    if (typeof value === "string" && value.length >= 8)
      expect(res.text, `${label} echoes the rejected value`).not.toContain(value);
    expect(await options.snapshot(), `${label} changed state`).toEqual(before);
  }
  const control = await call(options.method, options.path(), options.token(), options.base);
  expect(control.status, `control ${options.method} ${options.path()}: ${control.text}`).toBe(options.okStatus);
  if (options.controlChangesState !== false) expect(await options.snapshot()).not.toEqual(before);
  return control;
}

describe("mass assignment: unknown fields are refused and change nothing", () => {
  it("POST /merchants cannot set a balance, an id, a key hash or a payout address", async () => {
    const name = `mass-assign new merchant ${RUN}`;
    await expectRefusedThenControl({
      method: "POST",
      path: () => "/merchants",
      token: () => consoleKey,
      base: { name, category: "data" },
      unknown: {
        balanceMinor: 1_000_000,
        balance_minor: 1_000_000,
        id: `mch_massassign${RUN}`,
        merchantId: b.merchantId,
        apiKeyHash: "0".repeat(64),
        api_key_hash: "0".repeat(64),
        apiKey: `sk_mch_${"A".repeat(43)}`,
        payoutAddress: "0x000000000000000000000000000000000000dEaD",
        currency: "EUR",
        createdAt: "2000-01-01T00:00:00.000Z",
      },
      snapshot: () => rows("SELECT * FROM merchants WHERE name = ?", name),
      okStatus: 201,
    });
    const created = await rows("SELECT balance_minor, currency, payout_address FROM merchants WHERE name = ?", name);
    expect(created).toEqual([{ balance_minor: 0, currency: "USD", payout_address: null }]);
  });

  it("POST /merchant/charges cannot set status, merchantId, agentId, method, reference, paidAt", async () => {
    const control = await expectRefusedThenControl({
      method: "POST",
      path: () => "/merchant/charges",
      token: () => a.apiKey,
      base: { amountUsdCents: 120, description: "mass-assignment charge" },
      unknown: {
        status: "paid",
        merchantId: b.merchantId,
        merchant_id: b.merchantId,
        agentId: x.agentId,
        agent_id: x.agentId,
        method: "wallet",
        reference: `PAY_MASSASSIGN${RUN}`,
        paidAt: "2026-01-01T00:00:00.000Z",
        paid_at: "2026-01-01T00:00:00.000Z",
        amountMinor: 1,
        currency: "EUR",
        id: `chg_massassign${RUN}`,
        checkoutLinkId: `cl_massassign${RUN}`,
      },
      snapshot: () => rows("SELECT * FROM charges WHERE merchant_id IN (?, ?) ORDER BY id", a.merchantId, b.merchantId),
      okStatus: 201,
    });
    expect(control.body).toMatchObject({ merchantId: a.merchantId, status: "pending" });
    expect(
      await rows(
        "SELECT status, agent_id, method, reference, paid_at FROM charges WHERE id = ?",
        control.body.chargeId,
      ),
    ).toEqual([{ status: "pending", agent_id: null, method: null, reference: null, paid_at: null }]);
    expect(await rows("SELECT id FROM charges WHERE merchant_id = ?", b.merchantId)).toEqual([]);
  });

  for (const [key, text] of [
    [
      "__proto__",
      () =>
        `{"amountUsdCents":130,"__proto__":{"status":"paid","merchantId":"${b.merchantId}","agentId":"${x.agentId}"}}`,
    ],
    [
      "constructor",
      () => `{"amountUsdCents":130,"constructor":{"prototype":{"status":"paid","merchantId":"${b.merchantId}"}}}`,
    ],
  ] as const) {
    it(`a ${key} key in a charge body is refused like any other unknown field, and sets nothing`, async () => {
      const before = await rows(
        "SELECT * FROM charges WHERE merchant_id IN (?, ?) ORDER BY id",
        a.merchantId,
        b.merchantId,
      );
      const res = await call("POST", "/merchant/charges", a.apiKey, text());
      // Soft, so the state checks below still run and tell whether anything was actually assigned.
      expect.soft(res.status, `${text()}: ${res.text}`).toBe(400);
      expect.soft(res.body?.error).toBe("invalid_request");
      expect(
        await rows(
          "SELECT id FROM charges WHERE merchant_id = ? OR (merchant_id = ? AND (status != 'pending' OR agent_id IS NOT NULL))",
          b.merchantId,
          a.merchantId,
        ),
      ).toEqual([]);
      expect
        .soft(await rows("SELECT * FROM charges WHERE merchant_id IN (?, ?) ORDER BY id", a.merchantId, b.merchantId))
        .toEqual(before);
    });
  }

  it("POST /merchant/checkout cannot set counters, active, merchantId or the token", async () => {
    await expectRefusedThenControl({
      method: "POST",
      path: () => "/merchant/checkout",
      token: () => a.apiKey,
      base: { amountUsdCents: 300, description: "mass-assignment checkout" },
      unknown: {
        paymentsCount: 99,
        payments_count: 99,
        totalPaidMinor: 99_999,
        visits: 1_000,
        active: false,
        merchantId: b.merchantId,
        token: `ct_massassign${RUN}`,
        checkoutLinkId: `cl_massassign${RUN}`,
        currency: "EUR",
      },
      snapshot: () =>
        rows("SELECT * FROM checkout_links WHERE merchant_id IN (?, ?) ORDER BY id", a.merchantId, b.merchantId),
      okStatus: 201,
    });
    expect(await rows("SELECT id FROM checkout_links WHERE merchant_id = ?", b.merchantId)).toEqual([]);
  });

  it("PATCH /merchant/checkout-links/:token changes only `active`: counters, amount and owner are refused", async () => {
    const control = await expectRefusedThenControl({
      method: "PATCH",
      path: () => `/merchant/checkout-links/${linkToken}`,
      token: () => a.apiKey,
      base: { active: false },
      unknown: {
        paymentsCount: 99,
        totalPaidMinor: 99_999,
        visits: 0,
        amountUsdCents: 1,
        amountMinor: 1,
        description: "changed by mass assignment",
        merchantId: b.merchantId,
        token: `ct_massassign${RUN}`,
      },
      snapshot: () => rows("SELECT * FROM checkout_links WHERE token = ?", linkToken),
      okStatus: 200,
    });
    expect(control.body).toMatchObject({ active: false, paymentsCount: 0, totalPaidMinor: 0, amountMinor: 250 });
  });

  it("POST /merchant/paylinks cannot set uses, remainingMinor, spentMinor, merchantId or the code", async () => {
    await expectRefusedThenControl({
      method: "POST",
      path: () => "/merchant/paylinks",
      token: () => a.apiKey,
      base: { budgetUsdCents: 1000, label: "mass-assignment paylink" },
      unknown: {
        uses: 0,
        remainingMinor: 1_000_000,
        spentMinor: 0,
        budgetMinor: 1_000_000,
        merchantId: b.merchantId,
        code: `plc_massassign${RUN}`,
        expiresAt: "2999-01-01T00:00:00.000Z",
      },
      snapshot: () =>
        rows("SELECT * FROM paylinks WHERE merchant_id IN (?, ?) ORDER BY id", a.merchantId, b.merchantId),
      okStatus: 201,
    });
    expect(await rows("SELECT id FROM paylinks WHERE merchant_id = ?", b.merchantId)).toEqual([]);
  });

  it("POST /console/agents cannot set a balance, an id, a key hash or a deposit address, at the top level or inside the policy", async () => {
    const name = `mass-assign new agent ${RUN}`;
    const snapshot = () => rows("SELECT * FROM agents WHERE name = ?", name);
    const before = await snapshot();
    const nested = await call("POST", "/console/agents", consoleKey, {
      name,
      policy: { dailyLimitUsdCents: 100, balanceMinor: 1_000_000 },
    });
    expect(nested.status, nested.text).toBe(400);
    expect(nested.body?.error).toBe("invalid_request");
    expect(await snapshot()).toEqual(before);
    await expectRefusedThenControl({
      method: "POST",
      path: () => "/console/agents",
      token: () => consoleKey,
      base: { name, policy: { dailyLimitUsdCents: 100 } },
      unknown: {
        balanceMinor: 1_000_000,
        balance_minor: 1_000_000,
        agentId: y.agentId,
        id: `agent_massassign${RUN}`,
        apiKeyHash: "0".repeat(64),
        apiKey: `svc_sk_${"A".repeat(43)}`,
        depositAddress: "0x000000000000000000000000000000000000dEaD",
        currency: "EUR",
      },
      snapshot,
      okStatus: 201,
    });
    expect(await rows("SELECT balance_minor FROM agents WHERE name = ?", name)).toEqual([{ balance_minor: 0 }]);
  });

  it("PUT /console/agents/:id/policy refuses a field the policy does not have", async () => {
    const control = await expectRefusedThenControl({
      method: "PUT",
      path: () => `/console/agents/${x.agentId}/policy`,
      token: () => consoleKey,
      base: { dailyLimitUsdCents: 9000 },
      unknown: {
        balanceMinor: 1_000_000,
        bypassApproval: true,
        skipApprovalThreshold: true,
        agentId: y.agentId,
        name: "renamed by mass assignment",
        maxPerTransactionCents: 1,
      },
      snapshot: () => rows("SELECT * FROM agents WHERE id = ?", x.agentId),
      okStatus: 200,
    });
    expect(control.body.policy).toEqual({
      maxPerTransactionUsdCents: null,
      dailyLimitUsdCents: 9000,
      allowedCategories: null,
      approvalThresholdUsdCents: null,
      allowedX402Hosts: null,
    });
  });

  it("POST /console/agents/:id/credits cannot redirect the credit to another agent or set a balance", async () => {
    const agentsIds = [x.agentId, y.agentId];
    await expectRefusedThenControl({
      method: "POST",
      path: () => `/console/agents/${x.agentId}/credits`,
      token: () => consoleKey,
      base: { amountUsdCents: 50, reference: "mass-assignment credit" },
      unknown: {
        agentId: y.agentId,
        agent_id: y.agentId,
        balanceMinor: 1_000_000,
        amountMinor: 1_000_000,
        by: "intruder@example.com",
        currency: "EUR",
        merchantId: a.merchantId,
      },
      snapshot: async () => ({
        agents: await rows("SELECT id, balance_minor FROM agents WHERE id IN (?, ?) ORDER BY id", ...agentsIds),
        audit: await rows(
          "SELECT seq, type, agent_id, amount_minor FROM audit_events WHERE agent_id IN (?, ?) ORDER BY seq",
          ...agentsIds,
        ),
        ledger: await rows(
          "SELECT COUNT(*) AS n FROM ledger_entries WHERE account LIKE ? OR account LIKE ?",
          `%${x.agentId}%`,
          `%${y.agentId}%`,
        ),
      }),
      okStatus: 200,
    });
    expect(await rows("SELECT id, balance_minor FROM agents WHERE id IN (?, ?) ORDER BY id", ...agentsIds)).toEqual(
      [
        { id: x.agentId, balance_minor: 750 },
        { id: y.agentId, balance_minor: 0 },
      ].sort((p, q) => (p.id < q.id ? -1 : 1)),
    );
  });

  it("POST /settings/webhooks cannot choose the secret or the id", async () => {
    const url = `${receiverUrl()}/hooks/ok-mass-assign-${RUN}`;
    const control = await expectRefusedThenControl({
      method: "POST",
      path: () => "/settings/webhooks",
      token: () => consoleKey,
      base: { url, merchantId: a.merchantId },
      unknown: {
        secret: `whsec_${"A".repeat(43)}`,
        id: `wh_massassign${RUN}`,
        secretCiphertext: "v1:AAAA",
        previousSecretCiphertext: "v1:AAAA",
        createdBy: "intruder@example.com",
        disabledAt: "2000-01-01T00:00:00.000Z",
      },
      snapshot: () => rows("SELECT * FROM webhook_endpoints WHERE url = ?", url),
      okStatus: 201,
    });
    expect(control.body.secret).not.toBe(`whsec_${"A".repeat(43)}`);
    expect(control.body.id).not.toBe(`wh_massassign${RUN}`);
    expect(await rows("SELECT id FROM webhook_endpoints WHERE id = ?", `wh_massassign${RUN}`)).toEqual([]);
  });

  it("POST /settings/webhooks/:id/rotate-secret cannot choose the new secret", async () => {
    const url = `${receiverUrl()}/hooks/ok-mass-assign-rotate-${RUN}`;
    const created = await call("POST", "/settings/webhooks", consoleKey, { url });
    expect(created.status, created.text).toBe(201);
    const control = await expectRefusedThenControl({
      method: "POST",
      path: () => `/settings/webhooks/${created.body.id}/rotate-secret`,
      token: () => consoleKey,
      base: { graceSeconds: 0 },
      unknown: { secret: `whsec_${"B".repeat(43)}`, previousSecretExpiresAt: "2999-01-01T00:00:00.000Z" },
      snapshot: () => rows("SELECT * FROM webhook_endpoints WHERE id = ?", created.body.id),
      okStatus: 200,
    });
    expect(control.body.secret).not.toBe(`whsec_${"B".repeat(43)}`);
  });

  it("PUT /merchant/payout-address cannot set another merchant's address", async () => {
    await expectRefusedThenControl({
      method: "PUT",
      path: () => "/merchant/payout-address",
      token: () => a.apiKey,
      base: { address: "0x1111111111111111111111111111111111111111" },
      unknown: {
        merchantId: b.merchantId,
        merchant_id: b.merchantId,
        id: b.merchantId,
        kyt: { verdict: "pass" },
        verdict: "pass",
      },
      snapshot: () =>
        rows("SELECT id, payout_address FROM merchants WHERE id IN (?, ?) ORDER BY id", a.merchantId, b.merchantId),
      okStatus: 200,
    });
    expect(await rows("SELECT payout_address FROM merchants WHERE id = ?", b.merchantId)).toEqual([
      { payout_address: null },
    ]);
    expect(await rows("SELECT payout_address FROM merchants WHERE id = ?", a.merchantId)).toEqual([
      { payout_address: "0x1111111111111111111111111111111111111111" },
    ]);
  });

  it("POST /console/kyt/blocklist and POST /console/users cannot choose who added them", async () => {
    const address = `0x${RUN.replace(/[^0-9a-f]/g, "0").padEnd(8, "0")}${"2".repeat(32)}`;
    await expectRefusedThenControl({
      method: "POST",
      path: () => "/console/kyt/blocklist",
      token: () => consoleKey,
      base: { address, reason: "mass-assignment" },
      unknown: { addedBy: "intruder@example.com", createdAt: "2000-01-01T00:00:00.000Z" },
      snapshot: () => rows("SELECT * FROM kyt_blocklist WHERE address = ?", address.toLowerCase()),
      okStatus: 201,
    });
    expect(await rows("SELECT added_by FROM kyt_blocklist WHERE address = ?", address.toLowerCase())).toEqual([
      { added_by: "ops@example.com" },
    ]);
    const email = `mass-assign-${RUN}@example.com`;
    await expectRefusedThenControl({
      method: "POST",
      path: () => "/console/users",
      token: () => consoleKey,
      base: { email },
      unknown: { addedBy: "intruder@example.com", source: "configured", createdAt: "2000-01-01T00:00:00.000Z" },
      snapshot: () => rows("SELECT * FROM console_users WHERE email = ?", email),
      okStatus: 201,
    });
    expect(await rows("SELECT added_by FROM console_users WHERE email = ?", email)).toEqual([
      { added_by: "ops@example.com" },
    ]);
  });
});
