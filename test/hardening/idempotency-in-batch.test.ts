import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { setFaultHook } from "../../src/lib/faults";
import { type ApiResponse, api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant } from "../helpers/factories";

/**
 * Issue 7: an Idempotency-Key's answer is stored in the same D1 batch as the
 * effect it reports. The request below crashes after its effect committed and
 * before the middleware would store the answer; the retry with the same key
 * must replay the original answer, and the effect must exist exactly once.
 */
afterEach(() => setFaultHook(null));

function crashBeforeStoringOnce() {
  let fired = false;
  setFaultHook((at) => {
    if (fired || at !== "idempotency.before_store") return;
    fired = true;
    throw new Error("injected crash before the answer is stored");
  });
  return () => fired;
}

const count = async (sql: string, ...params: (string | number)[]) =>
  (await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${sql}`)
    .bind(...params)
    .first<{ n: number }>())!.n;

async function crashThenRetry(send: (headers: Record<string, string>) => Promise<ApiResponse>, key: string) {
  const fired = crashBeforeStoringOnce();
  const headers = { "Idempotency-Key": key };
  const first = await send(headers);
  expect(fired()).toBe(true);
  expect(first.status).toBe(500);
  const retry = await send(headers);
  expect(retry.headers.get("idempotent-replayed")).toBe("true");
  const again = await send(headers);
  expect(again.text).toBe(retry.text);
  return retry;
}

describe("answers stored in the batch of their effect survive a crash before the answer is stored", () => {
  it("POST /merchants: one merchant, and the replayed key works", async () => {
    const token = await consoleToken();
    const name = `crash-merchant-${crypto.randomUUID()}`;
    const retry = await crashThenRetry(
      (headers) => api("POST", "/merchants", { token, body: { name }, headers }),
      `m-${name}`,
    );
    expect(retry.status).toBe(201);
    expect(await count("merchants WHERE name = ?", name)).toBe(1);
    const me = await api("GET", "/merchant/me", { token: retry.body.apiKey });
    expect(me.body.merchant.merchantId ?? me.body.merchant.id).toBe(retry.body.merchantId);
  });

  it("POST /console/agents: one agent with its deposit address, and the replayed key works", async () => {
    const token = await consoleToken();
    const name = `crash-agent-${crypto.randomUUID()}`;
    const retry = await crashThenRetry(
      (headers) => api("POST", "/console/agents", { token, body: { name }, headers }),
      `a-${name}`,
    );
    expect(retry.status).toBe(201);
    expect(await count("agents WHERE name = ?", name)).toBe(1);
    const balance = await api("GET", "/balance", { token: retry.body.apiKey });
    expect(balance.body).toMatchObject({
      agentId: retry.body.agentId,
      balanceMinor: 0,
      depositAddress: retry.body.depositAddress,
    });
    expect(retry.body.depositAddress).toMatch(/^0x[0-9a-f]{40}$/);
  });

  it("POST /merchant/charges: one charge", async () => {
    const merchant = await createMerchant();
    const retry = await crashThenRetry(
      (headers) => api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 75 }, headers }),
      "crash-charge",
    );
    expect(retry.status).toBe(201);
    expect(await count("charges WHERE merchant_id = ?", merchant.merchantId)).toBe(1);
    expect(await count("charges WHERE id = ?", retry.body.chargeId)).toBe(1);
  });

  it("POST /merchant/checkout and POST /merchant/paylinks: one link each", async () => {
    const merchant = await createMerchant();
    const link = await crashThenRetry(
      (headers) =>
        api("POST", "/merchant/checkout", {
          token: merchant.apiKey,
          body: { amountUsdCents: 90, description: "report" },
          headers,
        }),
      "crash-link",
    );
    expect(link.status).toBe(201);
    expect(await count("checkout_links WHERE merchant_id = ?", merchant.merchantId)).toBe(1);
    const paylink = await crashThenRetry(
      (headers) =>
        api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 500 }, headers }),
      "crash-paylink",
    );
    expect(paylink.status).toBe(201);
    expect(await count("paylinks WHERE merchant_id = ?", merchant.merchantId)).toBe(1);
  });

  it("POST /settings/webhooks and rotate-secret: one endpoint, and the replayed secret is the one that signs", async () => {
    const token = await consoleToken();
    const url = `https://hooks.example.com/crash/${crypto.randomUUID()}`;
    const created = await crashThenRetry(
      (headers) => api("POST", "/settings/webhooks", { token, body: { url }, headers }),
      `wh-${url}`,
    );
    expect(created.status).toBe(201);
    expect(await count("webhook_endpoints WHERE url = ?", url)).toBe(1);
    const rotated = await crashThenRetry(
      (headers) =>
        api("POST", `/settings/webhooks/${created.body.id}/rotate-secret`, {
          token,
          body: { graceSeconds: 0 },
          headers,
        }),
      `rot-${url}`,
    );
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).not.toBe(created.body.secret);
    const { signingSecrets } = await import("../../src/webhooks/endpoints");
    const { settingsOf } = await import("../../src/config/env");
    const row = await env.DB.prepare("SELECT * FROM webhook_endpoints WHERE id = ?").bind(created.body.id).first();
    const endpoint = {
      ...(row as Record<string, unknown>),
      secretCiphertext: row!.secret_ciphertext,
      previousSecretCiphertext: row!.previous_secret_ciphertext,
      previousSecretExpiresAt: row!.previous_secret_expires_at,
    };
    expect(await signingSecrets(settingsOf(env).webhookSecretsKey, endpoint as never)).toEqual([rotated.body.secret]);
    // Nothing is delivered to the made-up host after this test.
    expect((await api("DELETE", `/settings/webhooks/${created.body.id}`, { token })).status).toBe(200);
  });

  it("POST /charges/:id/pay: paid once, with the merchant's balance after the payment", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 250);
    const retry = await crashThenRetry(
      (headers) => api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers }),
      "crash-pay",
    );
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({
      paid: true,
      charge: { chargeId: charge.chargeId, status: "paid", method: "ledger" },
      merchantBalanceMinor: 250,
    });
    expect(await balanceOf(agent.apiKey)).toBe(750);
  });

  it("POST /charges/:id/pay held for approval: one approval, the same approvalId replayed", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000, policy: { approvalThresholdUsdCents: 100 } });
    const charge = await createCharge(merchant.apiKey, 400);
    const retry = await crashThenRetry(
      (headers) => api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers }),
      "crash-hold",
    );
    expect(retry.status).toBe(402);
    expect(retry.body).toMatchObject({ pendingApproval: true, reason: "requiere_aprobacion_humana" });
    expect(await count("approvals WHERE charge_id = ?", charge.chargeId)).toBe(1);
    expect(await count("approvals WHERE id = ?", retry.body.approvalId)).toBe(1);
  });

  it("POST /checkout/:token/pay: one materialized charge", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 120, description: "page" },
    });
    const retry = await crashThenRetry(
      (headers) => api("POST", `/checkout/${link.body.checkoutToken}/pay`, { token: agent.apiKey, headers }),
      "crash-checkout",
    );
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual({ paid: true, charge: expect.objectContaining({ status: "paid" }) });
    expect(await count("charges WHERE merchant_id = ? AND status = 'paid'", merchant.merchantId)).toBe(1);
    expect(await balanceOf(agent.apiKey)).toBe(880);
  });

  it("POST /merchant/paylinks/:code/charge: drawn once, with the grant's figures", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const paylink = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 500 } });
    await api("POST", `/pl/${paylink.body.code}/accept`, { token: agent.apiKey });
    const body = { agentId: agent.agentId, amountUsdCents: 200 };
    const retry = await crashThenRetry(
      (headers) =>
        api("POST", `/merchant/paylinks/${paylink.body.code}/charge`, { token: merchant.apiKey, body, headers }),
      "crash-draw",
    );
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ paid: true, spentMinor: 200, remainingMinor: 300, exhausted: false });
    expect(await balanceOf(agent.apiKey)).toBe(800);
  });

  it("POST /approvals/:id/grant and POST /console/agents/:id/credits: one payment, one credit", async () => {
    const token = await consoleToken();
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000, policy: { approvalThresholdUsdCents: 100 } });
    const charge = await createCharge(merchant.apiKey, 400);
    const hold = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey });
    const granted = await crashThenRetry(
      (headers) => api("POST", `/approvals/${hold.body.approvalId}/grant`, { token, headers }),
      "crash-grant",
    );
    expect(granted.status).toBe(200);
    expect(granted.body).toMatchObject({
      approval: { approvalId: hold.body.approvalId, status: "granted" },
      charge: { status: "paid" },
    });
    const credited = await crashThenRetry(
      (headers) =>
        api("POST", `/console/agents/${agent.agentId}/credits`, { token, body: { amountUsdCents: 50 }, headers }),
      "crash-credit",
    );
    expect(credited.status).toBe(200);
    expect(credited.body).toEqual({ balanceMinor: 650 });
    expect(await balanceOf(agent.apiKey)).toBe(650);
  });
});

describe("a money answer stored by its batch is the live answer, byte for byte", () => {
  it("for a checkout payment, a draw, a grant and a credit", async () => {
    const token = await consoleToken();
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 2000, policy: { approvalThresholdUsdCents: 300 } });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 110, description: 'q "quoted" é \u2028' },
    });
    const paylink = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 300 } });
    await api("POST", `/pl/${paylink.body.code}/accept`, { token: agent.apiKey });
    const charge = await createCharge(merchant.apiKey, 400, {
      description: '"merchantBalanceMinor":-9007199254740991',
    });
    const hold = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey });
    const requests: [string, string, string, unknown][] = [
      ["POST", `/checkout/${link.body.checkoutToken}/pay`, agent.apiKey, undefined],
      [
        "POST",
        `/merchant/paylinks/${paylink.body.code}/charge`,
        merchant.apiKey,
        { agentId: agent.agentId, amountUsdCents: 300 },
      ],
      ["POST", `/approvals/${hold.body.approvalId}/grant`, token, undefined],
      ["POST", `/console/agents/${agent.agentId}/credits`, token, { amountUsdCents: 5 }],
    ];
    for (const [method, path, credential, body] of requests) {
      const headers = { "Idempotency-Key": `bytes-${path}` };
      const first = await api(method, path, { token: credential, body, headers });
      expect(first.status, path).toBe(200);
      const replay = await api(method, path, { token: credential, body, headers });
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.text, path).toBe(first.text);
    }
    // A description that looks like the template's placeholder is left as the merchant wrote it.
    const paid = await api("GET", `/charges/${charge.chargeId}`);
    expect(paid.body.description).toBe('"merchantBalanceMinor":-9007199254740991');
  });
});
