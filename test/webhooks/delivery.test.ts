import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { receiverUrl, registerEndpoint, waitForReceived, type ReceivedDelivery } from "../helpers/webhooks";

/**
 * An independent verifier written from spec section 6 (not the service's own
 * helper): v1 = lowercase hex HMAC-SHA256 with the endpoint secret over
 * "<t>.<raw body>", compared in constant time, t within 5 minutes.
 */
async function verifiesPerSpec(secret: string, delivery: ReceivedDelivery): Promise<boolean> {
  const header = delivery.headers["x-service-signature"] ?? "";
  const parts = header.split(",").map((p) => p.split("="));
  const t = parts.find(([k]) => k === "t")?.[1];
  const signatures = parts.filter(([k]) => k === "v1").map(([, v]) => v ?? "");
  if (!t || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${t}.${delivery.body}`)));
  const expected = Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
  return signatures.some((s) => s.length === expected.length && [...s].reduce((d, ch, i) => d | (ch.charCodeAt(0) ^ expected.charCodeAt(i)), 0) === 0);
}

const typesOf = (list: ReceivedDelivery[]) => list.map((d) => JSON.parse(d.body).type as string);

async function deliveriesOf(endpointId: string, done: (list: any[]) => boolean, timeoutMs = 20_000) {
  const token = await consoleToken();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api("GET", `/settings/webhooks/${endpointId}/deliveries`, { token });
    if (done(res.body.deliveries) || Date.now() > deadline) return res.body.deliveries as any[];
    await new Promise((r) => setTimeout(r, 150));
  }
}

describe("webhook delivery", () => {
  it("delivers every emitted kind, signed, with the spec's key fields", async () => {
    const merchant = await createMerchant();
    const hook = await registerEndpoint("ok-all-kinds", { merchantId: merchant.merchantId });
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1000 } });
    const paid = await createCharge(merchant.apiKey, 300);
    await payCharge(agent.apiKey, paid.chargeId);
    const held = await createCharge(merchant.apiKey, 2000);
    await payCharge(agent.apiKey, held.chargeId);
    const pl = (await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 100 } })).body;
    await api("POST", `/pl/${pl.code}/accept`, { token: agent.apiKey });
    await api("POST", `/merchant/paylinks/${pl.code}/charge`, { token: merchant.apiKey, body: { agentId: agent.agentId, amountUsdCents: 100 } });

    const kinds = ["charge.created", "payment.succeeded", "charge.succeeded", "approval.required", "paylink.accepted", "budget.exhausted"];
    const got = await waitForReceived("ok-all-kinds", (list) => kinds.every((k) => typesOf(list).includes(k)));
    for (const delivery of got) {
      expect(await verifiesPerSpec(hook.secret, delivery)).toBe(true);
      const envelope = JSON.parse(delivery.body);
      expect(Object.keys(envelope).sort()).toEqual(["createdAt", "data", "id", "type"]);
      expect(envelope.id).toMatch(/^evt_wh_/);
      expect(delivery.headers["x-service-event"]).toBe(envelope.type);
    }
    const byType = (type: string) => got.map((d) => JSON.parse(d.body)).find((e) => e.type === type && (e.data.chargeId === undefined || e.data.chargeId !== held.chargeId || type !== "charge.created"))!.data;
    expect(byType("charge.created")).toMatchObject({ chargeId: expect.any(String), amountMinor: expect.any(Number), merchantName: "Acme Data" });
    const succeeded = got.map((d) => JSON.parse(d.body)).find((e) => e.type === "payment.succeeded" && e.data.chargeId === paid.chargeId)!.data;
    expect(succeeded).toMatchObject({ chargeId: paid.chargeId, merchantId: merchant.merchantId, agentId: agent.agentId, amountMinor: 300, currency: "USD", method: "ledger", reference: expect.stringMatching(/^PAY_/) });
    const chargeSucceeded = got.map((d) => JSON.parse(d.body)).find((e) => e.type === "charge.succeeded" && e.data.chargeId === paid.chargeId)!.data;
    expect(chargeSucceeded).toEqual(succeeded);
    expect(byType("approval.required")).toMatchObject({ approvalId: expect.stringMatching(/^apr_/), reason: "requiere_aprobacion_humana", expiresAt: expect.any(String) });
    expect(byType("paylink.accepted")).toMatchObject({ grantId: expect.stringMatching(/^plg_/), paylinkId: pl.paylinkId, agentId: agent.agentId });
    expect(byType("budget.exhausted")).toMatchObject({ paylinkId: pl.paylinkId, spentMinor: 100 });
  });

  it("filters by kind and by merchant", async () => {
    const a = await createMerchant();
    const b = await createMerchant();
    await registerEndpoint("ok-only-created-a", { merchantId: a.merchantId, events: ["charge.created"] });
    await registerEndpoint("ok-merchant-a", { merchantId: a.merchantId });
    await registerEndpoint("ok-service-wide");
    const agent = await createAgent({ credit: 1000 });
    const ca = await createCharge(a.apiKey, 10);
    const cb = await createCharge(b.apiKey, 20);
    await payCharge(agent.apiKey, ca.chargeId);
    const wide = await waitForReceived("ok-service-wide", (list) => list.some((d) => d.body.includes(cb.chargeId)) && list.some((d) => JSON.parse(d.body).type === "charge.succeeded" && d.body.includes(ca.chargeId)));
    expect(wide.some((d) => d.body.includes(ca.chargeId))).toBe(true);
    const onlyA = await waitForReceived("ok-merchant-a", (list) => typesOf(list).includes("charge.succeeded"));
    expect(onlyA.some((d) => d.body.includes(cb.chargeId))).toBe(false);
    const created = await waitForReceived("ok-only-created-a", (list) => list.length >= 1);
    expect(new Set(typesOf(created))).toEqual(new Set(["charge.created"]));
    expect(created.some((d) => d.body.includes(cb.chargeId))).toBe(false);
  });

  it("a receiver failing twice gets the same envelope id three times; the deliveries list shows it", async () => {
    const merchant = await createMerchant();
    const hook = await registerEndpoint("fail2-retries", { merchantId: merchant.merchantId, events: ["charge.created"] });
    await createCharge(merchant.apiKey, 10);
    const got = await waitForReceived("fail2-retries", (list) => list.length >= 3);
    expect(new Set(got.map((d) => JSON.parse(d.body).id)).size).toBe(1);
    const [delivery] = await deliveriesOf(hook.id, (list) => list[0]?.status === "delivered");
    expect(delivery).toMatchObject({ eventId: JSON.parse(got[0]!.body).id, type: "charge.created", status: "delivered", attempts: 3, lastStatusCode: 200, lastError: null, nextAttemptAt: null, deliveredAt: expect.any(String) });
    expect(Object.keys(delivery).sort()).toEqual(["attempts", "createdAt", "deliveredAt", "eventId", "id", "lastError", "lastStatusCode", "nextAttemptAt", "status", "type"]);
  });

  it("a receiver that never answers 2xx ends failed with every attempt recorded, and can be redelivered", async () => {
    const merchant = await createMerchant();
    const hook = await registerEndpoint("fail-always", { merchantId: merchant.merchantId, events: ["charge.created"] });
    await createCharge(merchant.apiKey, 10);
    const [delivery] = await deliveriesOf(hook.id, (list) => list[0]?.status === "failed");
    expect(delivery).toMatchObject({ status: "failed", attempts: 5, lastStatusCode: 500, lastError: "http_500", nextAttemptAt: null });
    const attempts = await env.DB.prepare("SELECT attempt, status_code AS statusCode FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt").bind(delivery.id).all();
    expect(attempts.results).toEqual([1, 2, 3, 4, 5].map((attempt) => ({ attempt, statusCode: 500 })));
    // Redelivered at once: regression for the dead-letter consumer flipping a redelivered delivery back to failed.
    const redelivered = await api("POST", `/settings/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`, { token: await consoleToken() });
    expect(redelivered.status).toBe(202);
    await waitForReceived("fail-always", (list) => list.length >= 10);
  });

  it("no secret appears in any list, delivery or log", async () => {
    const log = vi.spyOn(console, "log");
    const error = vi.spyOn(console, "error");
    try {
      const merchant = await createMerchant();
      const hook = await registerEndpoint("ok-secret-check", { merchantId: merchant.merchantId });
      await createCharge(merchant.apiKey, 10);
      await waitForReceived("ok-secret-check", (list) => list.length >= 1);
      const token = await consoleToken();
      const list = await api("GET", "/settings/webhooks", { token });
      const deliveries = await api("GET", `/settings/webhooks/${hook.id}/deliveries`, { token });
      const received = await waitForReceived("ok-secret-check", () => true);
      const secretPart = hook.secret.slice("whsec_".length);
      for (const text of [list.text, deliveries.text, JSON.stringify(received), JSON.stringify([...log.mock.calls, ...error.mock.calls])]) {
        expect(text).not.toContain(secretPart);
      }
      expect(list.body.endpoints.find((e: { id: string }) => e.id === hook.id)).toEqual({ id: hook.id, url: `${receiverUrl()}/hooks/ok-secret-check`, events: [], merchantId: merchant.merchantId, createdAt: expect.any(String) });
    } finally {
      log.mockRestore();
      error.mockRestore();
    }
  });

  it("a rotated secret signs beside the old one during the grace period", async () => {
    const merchant = await createMerchant();
    const hook = await registerEndpoint("ok-rotation", { merchantId: merchant.merchantId, events: ["charge.created"] });
    const rotated = await api("POST", `/settings/webhooks/${hook.id}/rotate-secret`, { token: await consoleToken(), body: { graceSeconds: 3600 } });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    await createCharge(merchant.apiKey, 10);
    const [delivery] = await waitForReceived("ok-rotation", (list) => list.length >= 1);
    expect(delivery!.headers["x-service-signature"]!.match(/v1=/g)).toHaveLength(2);
    expect(await verifiesPerSpec(hook.secret, delivery!)).toBe(true);
    expect(await verifiesPerSpec(rotated.body.secret, delivery!)).toBe(true);
  });
});
