import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { expectAuthMatrix } from "../helpers/auth-matrix";
import { createAgent, createCharge, createMerchant } from "../helpers/factories";
import { waitFor } from "../helpers/wait";
import { receiverUrl, registerEndpoint, waitForReceived } from "../helpers/webhooks";

/*
 * The console's webhook endpoints API (docs/api.md, Webhooks), with the
 * operators' extras: delete and the deliveries list.
 */

const RUN = crypto.randomUUID().slice(0, 8);
/** A receiver URL on the local test receiver, unique to this run. */
const hookUrl = (name: string) => `${receiverUrl()}/hooks/ok-ep-${name}-${RUN}`;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const SECRET = /^whsec_[A-Za-z0-9_-]{43,}$/;

const create = async (body: unknown) => api("POST", "/settings/webhooks", { token: await consoleToken(), body });
const list = async () => api("GET", "/settings/webhooks", { token: await consoleToken() });
const deliveries = async (id: string, query = "") =>
  api("GET", `/settings/webhooks/${id}/deliveries${query}`, { token: await consoleToken() });
const remove = async (id: string) => api("DELETE", `/settings/webhooks/${id}`, { token: await consoleToken() });

describe("POST /settings/webhooks", () => {
  it("201 { id wh_, url, events, secret whsec_ } with the secret shown once", async () => {
    const merchant = await createMerchant();
    const url = hookUrl("create");
    const res = await create({ url, events: ["charge.created", "charge.succeeded"], merchantId: merchant.merchantId });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^wh_/),
      url,
      events: ["charge.created", "charge.succeeded"],
      secret: expect.stringMatching(SECRET),
    });
    expect(res.body.secret.length - "whsec_".length).toBeGreaterThanOrEqual(43);
    // Each endpoint gets its own id and secret.
    const second = await create({ url, events: ["charge.created"], merchantId: merchant.merchantId });
    expect(second.status).toBe(201);
    expect(second.body.id).not.toBe(res.body.id);
    expect(second.body.secret).not.toBe(res.body.secret);
  });

  it("omitted events mean all kinds: events []", async () => {
    const res = await create({ url: hookUrl("all-kinds") });
    expect(res.status).toBe(201);
    expect(res.body.events).toEqual([]);
    // (Service-wide and for every kind: removed again so it receives nothing of the rest of this file.)
    expect((await remove(res.body.id)).status).toBe(200);
  });

  it.each([
    ["an unknown event kind", { url: "https://example.com/h", events: ["charge.voided"] }],
    ["events not an array", { url: "https://example.com/h", events: "charge.created" }],
    ["a missing url", { events: [] }],
    ["an empty url", { url: "" }],
    ["a non-URL", { url: "not a url" }],
    ["a url that is not a string", { url: 42 }],
    ["an unknown field", { url: "https://example.com/h", secret: "whsec_mine" }],
    ["an unknown field beside valid ones", { url: "https://example.com/h", events: [], disabled: false }],
    ["an unknown merchantId", { url: "https://example.com/h", merchantId: "mch_nobody" }],
    ["a private address (in tests too)", { url: "http://10.0.0.1/h" }],
    ["the metadata address", { url: "https://169.254.169.254/latest/meta-data" }],
    ["plain http to a public host", { url: "http://example.com/h" }],
  ])("400 invalid_request for %s, and nothing is created", async (_name, body) => {
    const before = (await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_endpoints").first<{ n: number }>())!.n;
    const res = await create(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    expect(Array.isArray(res.body.issues)).toBe(true);
    expect(res.body.issues.length).toBeGreaterThan(0);
    expect(res.text).not.toContain("whsec_");
    const after = (await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_endpoints").first<{ n: number }>())!.n;
    expect(after).toBe(before);
  });

  it("400 for a body that is not JSON", async () => {
    const res = await api("POST", "/settings/webhooks", { token: await consoleToken(), body: "{not json" });
    expect(res.status).toBe(400);
  });

  it("the secret is not stored in plaintext: no column of webhook_endpoints holds it, before or after a rotation", async () => {
    const merchant = await createMerchant();
    const res = await create({ url: hookUrl("at-rest"), merchantId: merchant.merchantId });
    expect(res.status).toBe(201);
    const rotated = await api("POST", `/settings/webhooks/${res.body.id}/rotate-secret`, {
      token: await consoleToken(),
      body: { graceSeconds: 600 },
    });
    expect(rotated.status).toBe(200);
    const secrets = [res.body.secret as string, rotated.body.secret as string];

    const row = await env.DB.prepare("SELECT * FROM webhook_endpoints WHERE id = ?")
      .bind(res.body.id)
      .first<Record<string, unknown>>();
    expect(row).not.toBeNull();
    // Both secrets are kept (the old one signs during the grace period), so there is something to find if it were plain.
    expect(row!.secret_ciphertext).toEqual(expect.any(String));
    expect(row!.previous_secret_ciphertext).toEqual(expect.any(String));
    for (const [column, value] of Object.entries(row!)) {
      if (value === null || value === undefined) continue;
      const text = String(value);
      for (const secret of secrets) {
        expect(text.includes(secret.slice("whsec_".length)), `${column} holds a secret`).toBe(false);
        // Nor a plain base64 of it.
        expect(text.includes(btoa(secret).replace(/=+$/, "")), `${column} holds a base64 secret`).toBe(false);
      }
    }
    // Nor anywhere else in the table.
    const { results } = await env.DB.prepare("SELECT * FROM webhook_endpoints").all();
    const dump = JSON.stringify(results);
    for (const secret of secrets) expect(dump.includes(secret.slice("whsec_".length))).toBe(false);
  });
});

describe("GET /settings/webhooks", () => {
  it("200 { endpoints: [{ id, url, events, merchantId, createdAt }] } and no secret anywhere in the response", async () => {
    const merchant = await createMerchant();
    const scoped = await create({
      url: hookUrl("list-scoped"),
      events: ["payment.succeeded"],
      merchantId: merchant.merchantId,
    });
    const wide = await create({ url: hookUrl("list-wide"), events: ["deposit.confirmed"] });
    expect(scoped.status).toBe(201);
    expect(wide.status).toBe(201);
    const res = await list();
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(["endpoints"]);
    const endpoints = res.body.endpoints as Record<string, unknown>[];
    for (const e of endpoints)
      expect(Object.keys(e).sort()).toEqual(["createdAt", "events", "id", "merchantId", "url"]);
    expect(endpoints.find((e) => e.id === scoped.body.id)).toEqual({
      id: scoped.body.id,
      url: hookUrl("list-scoped"),
      events: ["payment.succeeded"],
      merchantId: merchant.merchantId,
      createdAt: expect.stringMatching(ISO),
    });
    expect(endpoints.find((e) => e.id === wide.body.id)).toEqual({
      id: wide.body.id,
      url: hookUrl("list-wide"),
      events: ["deposit.confirmed"],
      merchantId: null,
      createdAt: expect.stringMatching(ISO),
    });
    expect(res.text).not.toContain("whsec_");
    expect(res.text).not.toContain(scoped.body.secret.slice("whsec_".length));
    expect(res.text).not.toContain(wide.body.secret.slice("whsec_".length));
    expect(res.text).not.toMatch(/secret/i);
    expect((await remove(wide.body.id)).status).toBe(200);
  });
});

describe("GET /settings/webhooks/:id/deliveries", () => {
  it("200 { deliveries: [...] } with the operations fields, newest first; limit", async () => {
    const merchant = await createMerchant();
    const name = `ok-ep-deliveries-${RUN}`;
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const empty = await deliveries(endpoint.id);
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ deliveries: [] });

    const first = await createCharge(merchant.apiKey, 10);
    await waitForReceived(name, (l) => l.length >= 1);
    const second = await createCharge(merchant.apiKey, 20);
    const got = await waitForReceived(name, (l) => l.length >= 2);
    const eventOf = (chargeId: string) =>
      got.map((d) => JSON.parse(d.body)).find((e) => e.data.chargeId === chargeId)!.id as string;

    const res = await waitFor(
      "both delivered",
      () => deliveries(endpoint.id),
      (r) =>
        r.body.deliveries.length === 2 && r.body.deliveries.every((d: { status: string }) => d.status === "delivered"),
    );
    expect(Object.keys(res.body)).toEqual(["deliveries"]);
    const [newest, oldest] = res.body.deliveries;
    for (const d of res.body.deliveries) {
      expect(Object.keys(d).sort()).toEqual([
        "attempts",
        "createdAt",
        "deliveredAt",
        "eventId",
        "id",
        "lastError",
        "lastStatusCode",
        "nextAttemptAt",
        "status",
        "type",
      ]);
      expect(d).toMatchObject({
        id: expect.any(String),
        type: "charge.created",
        status: "delivered",
        attempts: 1,
        lastStatusCode: 200,
        lastError: null,
        nextAttemptAt: null,
        createdAt: expect.stringMatching(ISO),
        deliveredAt: expect.stringMatching(ISO),
      });
    }
    expect(newest.eventId).toBe(eventOf(second.chargeId));
    expect(oldest.eventId).toBe(eventOf(first.chargeId));
    expect(newest.createdAt >= oldest.createdAt).toBe(true);
    expect(newest.id).not.toBe(oldest.id);

    const limited = await deliveries(endpoint.id, "?limit=1");
    expect(limited.status).toBe(200);
    expect(limited.body.deliveries.map((d: { id: string }) => d.id)).toEqual([newest.id]);
    expect((await deliveries(endpoint.id, "?limit=0")).status).toBe(400);
  });

  it("404 for an unknown endpoint", async () => {
    const res = await deliveries(`wh_unknown_${RUN}`);
    expect(res.status).toBe(404);
    expect(res.body.error).toEqual(expect.any(String));
  });
});

describe("DELETE /settings/webhooks/:id", () => {
  it("removes the endpoint from the list and stops deliveries to it; a second delete is 404", async () => {
    const merchant = await createMerchant();
    const keptName = `ok-ep-kept-${RUN}`;
    const goneName = `ok-ep-deleted-${RUN}`;
    const kept = await registerEndpoint(keptName, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const gone = await registerEndpoint(goneName, { merchantId: merchant.merchantId, events: ["charge.created"] });

    // Both receive while both exist.
    const before = await createCharge(merchant.apiKey, 10);
    await waitForReceived(goneName, (l) => l.some((d) => d.body.includes(before.chargeId)));
    await waitForReceived(keptName, (l) => l.some((d) => d.body.includes(before.chargeId)));

    const res = await remove(gone.id);
    expect(res.status).toBe(200);
    expect((await list()).body.endpoints.map((e: { id: string }) => e.id)).not.toContain(gone.id);
    expect((await list()).body.endpoints.map((e: { id: string }) => e.id)).toContain(kept.id);
    const again = await remove(gone.id);
    expect(again.status).toBe(404);
    expect(again.body.error).toEqual(expect.any(String));
    expect((await deliveries(gone.id)).status).toBe(404);

    // The next event reaches the kept endpoint (the control) and not the deleted one.
    const after = await createCharge(merchant.apiKey, 20);
    const keptGot = await waitForReceived(keptName, (l) => l.some((d) => d.body.includes(after.chargeId)));
    const afterEvent = keptGot.map((d) => JSON.parse(d.body)).find((e) => e.data.chargeId === after.chargeId)!
      .id as string;
    // Fan-out writes every endpoint's delivery of an event in one batch: none was written for the deleted one.
    const rows = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ? AND event_id = ?",
    )
      .bind(gone.id, afterEvent)
      .first<{ n: number }>();
    expect(rows!.n).toBe(0);
    const goneGot = await waitForReceived(goneName, () => true);
    expect(goneGot.some((d) => d.body.includes(after.chargeId))).toBe(false);
    expect(goneGot).toHaveLength(1);
  });

  it("404 for an unknown endpoint", async () => {
    expect((await remove(`wh_unknown_${RUN}`)).status).toBe(404);
  });
});

describe("console authentication on every webhook route", () => {
  it("401 without a credential, 403 with a merchant key or an agent key", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent();
    const endpoint = await registerEndpoint(`ok-ep-auth-${RUN}`, {
      merchantId: merchant.merchantId,
      events: ["deposit.confirmed"],
    });
    const routes: [string, string, unknown?][] = [
      [
        "POST",
        "/settings/webhooks",
        { url: hookUrl("auth-post"), merchantId: merchant.merchantId, events: ["deposit.confirmed"] },
      ],
      ["GET", "/settings/webhooks"],
      ["GET", `/settings/webhooks/${endpoint.id}/deliveries`],
      ["POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, { graceSeconds: 0 }],
      ["POST", `/settings/webhooks/${endpoint.id}/deliveries/whd_x/redeliver`],
      ["DELETE", `/settings/webhooks/${endpoint.id}`],
    ];
    const count = async () =>
      (await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_endpoints").first<{ n: number }>())!.n;
    const endpointsBefore = await count();
    for (const [method, path, body] of routes) {
      const none = await api(method, path, { body });
      expect(none.status, `${method} ${path} without a credential`).toBe(401);
      expect(none.body.error).toBe("console_session_required");
      for (const token of [merchant.apiKey, agent.apiKey]) {
        const res = await api(method, path, { token, body });
        expect(res.status, `${method} ${path} with ${token.slice(0, 7)}`).toBe(403);
        expect(res.text).not.toContain("whsec_");
      }
    }
    // Nothing was created, rotated or deleted by the refused requests.
    expect(await count()).toBe(endpointsBefore);
    expect((await list()).body.endpoints.map((e: { id: string }) => e.id)).toContain(endpoint.id);
    const row = await env.DB.prepare(
      "SELECT previous_secret_ciphertext AS previous, disabled_at AS disabledAt FROM webhook_endpoints WHERE id = ?",
    )
      .bind(endpoint.id)
      .first();
    expect(row).toEqual({ previous: null, disabledAt: null });
  });

  it.each([
    ["POST", "/settings/webhooks"],
    ["GET", "/settings/webhooks"],
    ["GET", "/settings/webhooks/wh_matrix/deliveries"],
    ["DELETE", "/settings/webhooks/wh_matrix"],
    ["POST", "/settings/webhooks/wh_matrix/rotate-secret"],
    ["POST", "/settings/webhooks/wh_matrix/deliveries/whd_matrix/redeliver"],
  ])("%s %s: the full credential matrix (invalid credentials 401, other kinds 403)", async (method, path) => {
    // The POST body registers an endpoint for a kind this file never emits, on the local receiver.
    const body =
      method === "POST" && path === "/settings/webhooks"
        ? { url: hookUrl("matrix"), events: ["deposit.confirmed"] }
        : method === "POST" && path.endsWith("rotate-secret")
          ? { graceSeconds: 0 }
          : undefined;
    await expectAuthMatrix({ method, path, expects: "console", body });
  });
});
