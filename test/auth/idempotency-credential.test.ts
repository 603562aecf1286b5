import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { signConsoleToken } from "../../src/auth/jwt";
import { api, consoleToken, OPS_EMAIL } from "../helpers/api";
import { createAgent, createMerchant } from "../helpers/factories";

/**
 * A stored Idempotency-Key answer is replayed only to a credential that is
 * valid now and of the kind the route expects: the credential is checked
 * first, exactly as without the key (docs/api.md, Credentials).
 */
describe("Idempotency-Key replays only to a valid credential (regression)", () => {
  const register = (token: string, key: string, name = "Replay Shop") =>
    api("POST", "/merchants", { token, body: { name }, headers: { "Idempotency-Key": key } });

  it("a signed-out session is 401, not the stored answer with the merchant's key", async () => {
    const token = await consoleToken();
    const first = await register(token, "signed-out-replay");
    expect(first.status).toBe(201);
    expect(first.body.apiKey).toMatch(/^sk_mch_/);
    expect((await register(token, "signed-out-replay")).headers.get("idempotent-replayed")).toBe("true");

    expect((await api("POST", "/console/auth/sign-out", { token })).status).toBe(200);
    const replay = await register(token, "signed-out-replay");
    expect(replay.status).toBe(401);
    expect(replay.body).toEqual({ error: "console_session_required" });
    expect(replay.headers.get("idempotent-replayed")).toBeNull();
    expect(replay.text).not.toContain(first.body.apiKey);
  });

  it("an expired session is 401, not the stored answer", async () => {
    const { token, expiresAt } = await signConsoleToken(env.CONSOLE_SESSION_SECRET!, OPS_EMAIL, 2);
    const first = await register(token, "expired-replay", "Expiry Shop");
    expect(first.status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(expiresAt) - Date.now()) + 50));
    const replay = await register(token, "expired-replay", "Expiry Shop");
    expect(replay.status).toBe(401);
    expect(replay.body).toEqual({ error: "console_session_required" });
    expect(replay.headers.get("idempotent-replayed")).toBeNull();
    expect(replay.text).not.toContain(first.body.apiKey);
  });

  it("a console user who was removed is 401 on replay", async () => {
    const email = `removed-${crypto.randomUUID()}@example.com`;
    expect((await api("POST", "/console/users", { token: await consoleToken(), body: { email } })).status).toBe(201);
    const token = await consoleToken(email);
    expect((await register(token, "removed-user-replay")).status).toBe(201);
    await env.DB.prepare("DELETE FROM console_users WHERE email = ?").bind(email).run();
    const replay = await register(token, "removed-user-replay");
    expect(replay.status).toBe(401);
    expect(replay.body).toEqual({ error: "console_session_required" });
  });

  it("keys are scoped to the credential: another console user with the same key and body runs its own request", async () => {
    const other = `other-${crypto.randomUUID()}@example.com`;
    const mine = await consoleToken();
    expect((await api("POST", "/console/users", { token: mine, body: { email: other } })).status).toBe(201);
    const first = await register(mine, "per-credential-replay", "Mine");
    const theirs = await register(await consoleToken(other), "per-credential-replay", "Mine");
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get("idempotent-replayed")).toBeNull();
    expect(theirs.body.merchantId).not.toBe(first.body.merchantId);
    expect(theirs.body.apiKey).not.toBe(first.body.apiKey);
  });

  it("keys are scoped to who asks, not the header's bytes: `bearer`, an extra space or a rolled key replays the one payout", async () => {
    const merchant = await createMerchant({ name: "One Payout" });
    const agent = await createAgent({ credit: 500 });
    const charge = await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 500 } });
    expect((await api("POST", `/charges/${charge.body.chargeId}/pay`, { token: agent.apiKey })).status).toBe(200);
    const address = "0x5555555555555555555555555555555555555555";
    expect((await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } })).status).toBe(
      200,
    );
    const payout = (authorization: string) =>
      api("POST", "/merchant/payouts", {
        body: { amountUsdCents: 100 },
        headers: { authorization, "Idempotency-Key": "one-payout" },
      });
    const first = await payout(`Bearer ${merchant.apiKey}`);
    expect(first.status).toBe(201);
    for (const variant of [`bearer ${merchant.apiKey}`, `BEARER ${merchant.apiKey}`, `Bearer  ${merchant.apiKey}`]) {
      const again = await payout(variant);
      expect(again.status, variant).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.text).toBe(first.text);
    }
    const rolled = await api("POST", `/console/merchants/${merchant.merchantId}/keys`, { token: await consoleToken() });
    expect(rolled.status).toBe(201);
    const afterRoll = await payout(`Bearer ${rolled.body.apiKey}`);
    expect(afterRoll.headers.get("idempotent-replayed")).toBe("true");
    expect(afterRoll.text).toBe(first.text);
    const list = await api("GET", "/merchant/payouts", { token: rolled.body.apiKey });
    expect(list.body.payouts).toHaveLength(1);
  });

  it("a missing, malformed or unknown credential is the route's own 401, and a credential of another kind its 403, key or not", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent();
    const headers = { "Idempotency-Key": "refused-credential" };
    const bare = await api("POST", "/merchant/charges", { body: { amountUsdCents: 10 }, headers });
    expect(bare.status).toBe(401);
    expect(bare.body).toEqual({ error: "merchant_api_key_required" });
    const malformed = await api("POST", "/merchant/charges", {
      body: { amountUsdCents: 10 },
      headers: { ...headers, authorization: "Basic abc" },
    });
    expect(malformed.status).toBe(401);
    expect(malformed.body).toEqual({ error: "merchant_api_key_required" });
    const unknown = await api("POST", "/merchant/charges", {
      token: `sk_mch_${"B".repeat(43)}`,
      body: { amountUsdCents: 10 },
      headers,
    });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ error: "merchant_api_key_required" });
    const wrongKind = await api("POST", "/merchant/charges", {
      token: agent.apiKey,
      body: { amountUsdCents: 10 },
      headers,
    });
    expect(wrongKind.status).toBe(403);
    expect(wrongKind.body).toEqual({ error: "credential_not_allowed", expected: "merchant_api_key" });
    // A bad key header is checked only once the credential is: an unauthenticated caller learns nothing from it.
    const badKey = await api("POST", "/merchant/charges", {
      token: `sk_mch_${"B".repeat(43)}`,
      body: { amountUsdCents: 10 },
      headers: { "Idempotency-Key": "x".repeat(256) },
    });
    expect(badKey.status).toBe(401);
    expect(
      (await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 10 }, headers }))
        .status,
    ).toBe(201);
  });

  it("a key on a route mounted behind a shared requireActor (webhook endpoints) is reserved once and replays", async () => {
    const token = await consoleToken();
    const headers = { "Idempotency-Key": "webhook-create-once" };
    const body = { url: "https://hooks.example.com/replay", events: [] };
    const first = await api("POST", "/settings/webhooks", { token, body, headers });
    expect(first.status).toBe(201);
    const replay = await api("POST", "/settings/webhooks", { token, body, headers });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(first.text);
  });
});
