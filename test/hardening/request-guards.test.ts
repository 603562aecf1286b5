import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance } from "../helpers/factories";

describe("Idempotency-Key", () => {
  it("replays the first response byte for byte and moves money once", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 300);
    const headers = { "Idempotency-Key": "pay-once-1" };
    const first = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
    const second = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.text).toBe(first.text);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(await balanceOf(agent.apiKey)).toBe(700);
    expect(await merchantBalance(merchant.apiKey)).toBe(300);
  });

  it("creates one charge for parallel retries: one runs, the rest replay or are told it is in use", async () => {
    const merchant = await createMerchant();
    const responses = await Promise.all(
      Array.from({ length: 8 }, () =>
        api("POST", "/merchant/charges", {
          token: merchant.apiKey,
          body: { amountUsdCents: 50 },
          headers: { "Idempotency-Key": "create-1" },
        }),
      ),
    );
    const created = responses.filter((r) => r.status === 201);
    expect(
      responses.every((r) => r.status === 201 || (r.status === 409 && r.body.error === "idempotency_key_in_use")),
    ).toBe(true);
    expect(new Set(created.map((r) => r.body.chargeId)).size).toBe(1);
    const list = await api("GET", "/merchant/charges", { token: merchant.apiKey });
    expect(list.body.charges).toHaveLength(1);
  });

  it("the same key with a different body is 409 idempotency_key_reused", async () => {
    const merchant = await createMerchant();
    const headers = { "Idempotency-Key": "reuse-1" };
    expect(
      (await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 50 }, headers }))
        .status,
    ).toBe(201);
    const reused = await api("POST", "/merchant/charges", {
      token: merchant.apiKey,
      body: { amountUsdCents: 51 },
      headers,
    });
    expect(reused.status).toBe(409);
    expect(reused.body).toEqual({ error: "idempotency_key_reused" });
  });

  it("a request that failed validation stores nothing, so the key works afterwards", async () => {
    const merchant = await createMerchant();
    const headers = { "Idempotency-Key": "after-400" };
    expect(
      (await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 0 }, headers })).status,
    ).toBe(400);
    const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE key = 'after-400'").first<{
      n: number;
    }>();
    expect(rows?.n).toBe(0);
    expect(
      (await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 5 }, headers })).status,
    ).toBe(201);
  });

  it("keys are scoped to the credential", async () => {
    const a = await createMerchant();
    const b = await createMerchant();
    const headers = { "Idempotency-Key": "shared-key" };
    const ra = await api("POST", "/merchant/charges", { token: a.apiKey, body: { amountUsdCents: 10 }, headers });
    const rb = await api("POST", "/merchant/charges", { token: b.apiKey, body: { amountUsdCents: 10 }, headers });
    expect(rb.status).toBe(201);
    expect(rb.body.chargeId).not.toBe(ra.body.chargeId);
    expect(rb.body.merchantId).toBe(b.merchantId);
  });

  it("a malformed key is 400", async () => {
    const merchant = await createMerchant();
    const res = await api("POST", "/merchant/charges", {
      token: merchant.apiKey,
      body: { amountUsdCents: 10 },
      headers: { "Idempotency-Key": "x".repeat(256) },
    });
    expect(res.status).toBe(400);
  });
});

describe("request body limit", () => {
  it("a body over 64 KiB is 413", async () => {
    const merchant = await createMerchant();
    const res = await api("POST", "/merchant/charges", {
      token: merchant.apiKey,
      body: JSON.stringify({ amountUsdCents: 10, description: "x".repeat(70_000) }),
    });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ error: "payload_too_large" });
  });
});

describe("rate limits", () => {
  it("a credential over its limit gets 429 with Retry-After, and nothing runs", async () => {
    const { buildApp } = await import("../../src/app");
    const merchant = await createMerchant();
    const refusing = { limit: async () => ({ success: false }) } as unknown as RateLimit;
    const seen: string[] = [];
    const counting = {
      limit: async ({ key }: { key: string }) => {
        seen.push(key);
        return { success: true };
      },
    } as unknown as RateLimit;
    const app = buildApp();
    const request = () =>
      new Request("http://service.test/merchant/charges", {
        method: "POST",
        headers: { authorization: `Bearer ${merchant.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ amountUsdCents: 10 }),
      });
    const ctx = {
      waitUntil: () => undefined,
      passThroughOnException: () => undefined,
      props: {},
    } as unknown as ExecutionContext;
    const limited = await app.fetch(request(), { ...env, CREDENTIAL_RATE_LIMIT: refusing }, ctx);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("10");
    expect(await limited.json()).toEqual({ error: "too_many_requests" });
    const list = await api("GET", "/merchant/charges", { token: merchant.apiKey });
    expect(list.body.charges).toHaveLength(0);
    const allowed = await app.fetch(
      request(),
      { ...env, CREDENTIAL_RATE_LIMIT: counting, CLIENT_RATE_LIMIT: counting },
      ctx,
    );
    expect(allowed.status).toBe(201);
    expect(seen).toEqual(["client:local", `merchant:${merchant.merchantId}`]);
  });

  it("a client address over its limit gets 429 before any credential is checked", async () => {
    const { buildApp } = await import("../../src/app");
    const refusing = { limit: async () => ({ success: false }) } as unknown as RateLimit;
    const ctx = {
      waitUntil: () => undefined,
      passThroughOnException: () => undefined,
      props: {},
    } as unknown as ExecutionContext;
    const res = await buildApp().fetch(
      new Request("http://service.test/charges/chg_x"),
      { ...env, CLIENT_RATE_LIMIT: refusing },
      ctx,
    );
    expect(res.status).toBe(429);
  });
});

describe("stored idempotent responses", () => {
  it("are encrypted at rest: a key shown once is replayed, never stored in plaintext (regression)", async () => {
    const token = await consoleToken();
    const headers = { "Idempotency-Key": "register-once" };
    const first = await api("POST", "/merchants", { token, body: { name: "Once Shop" }, headers });
    const replay = await api("POST", "/merchants", { token, body: { name: "Once Shop" }, headers });
    expect(first.status).toBe(201);
    expect(replay.text).toBe(first.text);
    const rows = await env.DB.prepare("SELECT * FROM idempotency_keys").all();
    const dump = JSON.stringify(rows.results);
    expect(dump).not.toContain(first.body.apiKey.slice("sk_mch_".length));
    expect(dump).toContain("v1:");
  });
});

describe("an abandoned Idempotency-Key", () => {
  it("a reservation left in_progress by a crash is taken over by the same request after a minute, and still ends in one effect", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 300);
    const headers = { "Idempotency-Key": "crashed-after-commit" };
    expect((await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers })).status).toBe(200);
    // Simulate the crash between the money batch and storing the response.
    await env.DB.prepare(
      "UPDATE idempotency_keys SET status = 'in_progress', response_status = NULL, response_body = NULL WHERE key = 'crashed-after-commit'",
    ).run();
    const fresh = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
    expect(fresh.status).toBe(409);
    expect(fresh.body).toEqual({ error: "idempotency_key_in_use" });
    await env.DB.prepare("UPDATE idempotency_keys SET created_at = ? WHERE key = 'crashed-after-commit'")
      .bind(new Date(Date.now() - 61_000).toISOString())
      .run();
    const takenOver = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
    expect(takenOver.status).toBe(409);
    expect(takenOver.body).toEqual({ error: "charge_not_pending" });
    expect(await balanceOf(agent.apiKey)).toBe(700);
    const replay = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(takenOver.text);
  });
});

describe("unknown ids in paths", () => {
  it("are 404 whatever their length (the contract's 'unknown'); only an absurd segment is 400", async () => {
    const long = (prefix: string) => prefix + "a".repeat(70);
    expect(await api("GET", `/charges/${long("chg_")}`)).toMatchObject({
      status: 404,
      body: { error: "charge_not_found" },
    });
    expect((await api("GET", `/checkout/${long("ct_")}`)).status).toBe(404);
    expect((await api("GET", `/pl/${long("pl_")}`)).status).toBe(404);
    expect((await api("GET", `/charges/${long("chg_")}/x402`)).status).toBe(404);
    expect((await api("GET", `/charges/chg_${"a".repeat(600)}`)).status).toBe(400);
  });
});
