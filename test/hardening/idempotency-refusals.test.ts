import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { buildApp } from "../../src/app";
import { api, consoleToken } from "../helpers/api";
import { createMerchant } from "../helpers/factories";

const ctx = {
  waitUntil: () => undefined,
  passThroughOnException: () => undefined,
  props: {},
} as unknown as ExecutionContext;
const refusing = { limit: async () => ({ success: false }) } as unknown as RateLimit;
const allowing = { limit: async () => ({ success: true }) } as unknown as RateLimit;

const keyRows = (key: string) =>
  env.DB.prepare("SELECT status, response_status AS responseStatus FROM idempotency_keys WHERE key = ?")
    .bind(key)
    .all()
    .then((r) => r.results);

/** Stripe keeps an answer only once the endpoint started running; a refusal before it keeps nothing. */
describe("an Idempotency-Key refused before its endpoint ran", () => {
  it("a per-credential 429 is not stored: it keeps its Retry-After, and the same key runs once the limit clears (regression)", async () => {
    const merchant = await createMerchant();
    const app = buildApp();
    const request = () =>
      new Request("http://service.test/merchant/charges", {
        method: "POST",
        headers: {
          authorization: `Bearer ${merchant.apiKey}`,
          "content-type": "application/json",
          "idempotency-key": "limited-then-clear",
        },
        body: JSON.stringify({ amountUsdCents: 10 }),
      });

    const limited = await app.fetch(request(), { ...env, CREDENTIAL_RATE_LIMIT: refusing }, ctx);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("10");
    expect(await limited.json()).toEqual({ error: "too_many_requests" });
    expect(await keyRows("limited-then-clear")).toEqual([]);

    const cleared = await app.fetch(request(), { ...env, CREDENTIAL_RATE_LIMIT: allowing }, ctx);
    expect(cleared.status).toBe(201);
    expect(cleared.headers.get("idempotent-replayed")).toBeNull();
    const created = (await cleared.json()) as { chargeId: string };
    expect(
      (await api("GET", "/merchant/charges", { token: merchant.apiKey })).body.charges.map(
        (c: { chargeId: string }) => c.chargeId,
      ),
    ).toEqual([created.chargeId]);

    const replay = await app.fetch(request(), { ...env, CREDENTIAL_RATE_LIMIT: allowing }, ctx);
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(((await replay.json()) as { chargeId: string }).chargeId).toBe(created.chargeId);
  });

  it("a 401 (invalid credential) and a 403 (a credential of another kind) leave no row behind", async () => {
    const merchant = await createMerchant();
    const unknown = await api("POST", "/merchant/charges", {
      token: `sk_mch_${"A".repeat(43)}`,
      body: { amountUsdCents: 10 },
      headers: { "Idempotency-Key": "refused-401" },
    });
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ error: "merchant_api_key_required" });
    expect(await keyRows("refused-401")).toEqual([]);

    const wrongKind = await api("POST", "/merchants", {
      token: merchant.apiKey,
      body: { name: "Not Mine" },
      headers: { "Idempotency-Key": "refused-403" },
    });
    expect(wrongKind.status).toBe(403);
    expect(wrongKind.body).toEqual({ error: "credential_not_allowed", expected: "console_session" });
    expect(await keyRows("refused-403")).toEqual([]);
  });

  it("an answer from a handler that ran is still stored and replayed (a 404 here)", async () => {
    const token = await consoleToken();
    const headers = { "Idempotency-Key": "ran-409" };
    const missing = await api("POST", "/approvals/apr_doesnotexist/grant", { token, headers });
    expect(missing.status).toBe(404);
    expect(await keyRows("ran-409")).toEqual([{ status: "done", responseStatus: 404 }]);
    const replay = await api("POST", "/approvals/apr_doesnotexist/grant", { token, headers });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(missing.text);
  });
});
