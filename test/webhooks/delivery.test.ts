import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { dispatchOutbox, enqueueDeliveries, fanOutOutbox } from "../../src/webhooks/dispatch";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { waitFor } from "../helpers/wait";
import { type ReceivedDelivery, received, receiverUrl, registerEndpoint, waitForReceived } from "../helpers/webhooks";

/*
 * Webhook delivery through the Worker in workerd, with the Queue consumer
 * running and a real HTTP receiver on 127.0.0.1 (test/setup/receiver.global.ts;
 * behaviour by the hook name's first word). Retry schedule "0,0,0,0" (five
 * attempts), delivery timeout 2 s.
 */

/** Hook names unique to this run of this file. */
const RUN = crypto.randomUUID().slice(0, 8);
const hook = (behaviour: "ok" | "fail2" | "fail" | "slow" | "redirect", name: string) =>
  `${behaviour}-dl-${name}-${RUN}`;

// ---------------------------------------------------------------------------
// An independent verifier, written from docs/api.md (Webhooks) only (not the
// client's client/src/webhooks.ts): header `t=<unix>,v1=<hex>[,v1=...]`;
// v1 = lowercase hex HMAC-SHA256, key = the endpoint secret, message =
// "<t>.<raw body>"; constant-time comparison; t within about 5 minutes.
// ---------------------------------------------------------------------------
const utf8 = new TextEncoder();

async function hmacSha256LowerHex(key: string, message: string): Promise<string> {
  const cryptoKey = await crypto.subtle.importKey("raw", utf8.encode(key), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, utf8.encode(message)));
  let hex = "";
  for (const byte of mac) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/** Compares two strings in time that depends only on their length. */
function timingSafeEqual(a: string, b: string): boolean {
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  if (x.length !== y.length) return false;
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i]! ^ y[i]!;
  return diff === 0;
}

interface ParsedSignature {
  t: string;
  v1: string[];
}

function parseSignatureHeader(header: string | undefined): ParsedSignature | null {
  if (!header) return null;
  let t: string | undefined;
  const v1: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) return null;
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (key === "t") t = value;
    else if (key === "v1") v1.push(value);
  }
  if (t === undefined || !/^\d+$/.test(t) || v1.length === 0) return null;
  return { t, v1 };
}

/** For each v1 entry of the delivery's header: does it verify under `secret`? */
async function v1Matches(secret: string, delivery: ReceivedDelivery): Promise<boolean[]> {
  const parsed = parseSignatureHeader(delivery.headers["x-service-signature"]);
  if (!parsed) return [];
  const expected = await hmacSha256LowerHex(secret, `${parsed.t}.${delivery.body}`);
  return parsed.v1.map((candidate) => timingSafeEqual(candidate, expected));
}

/** The receiver's check from section 6: some v1 matches, and t is within 5 minutes. */
async function verifiesPerSpec(secret: string, delivery: ReceivedDelivery): Promise<boolean> {
  const parsed = parseSignatureHeader(delivery.headers["x-service-signature"]);
  if (!parsed) return false;
  if (Math.abs(Math.floor(Date.now() / 1000) - Number(parsed.t)) > 300) return false;
  return (await v1Matches(secret, delivery)).some(Boolean);
}

// ---------------------------------------------------------------------------

interface Envelope {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}
const envelopeOf = (d: ReceivedDelivery) => JSON.parse(d.body) as Envelope;
const envelopes = (list: ReceivedDelivery[]) => list.map(envelopeOf);
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

interface DeliveryView {
  id: string;
  eventId: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

/** Polls the deliveries list of an endpoint until `done` holds; fails with the last list at the deadline. */
async function waitForDeliveries(
  endpointId: string,
  done: (list: DeliveryView[]) => boolean,
  timeoutMs = 30_000,
): Promise<DeliveryView[]> {
  const token = await consoleToken();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api("GET", `/settings/webhooks/${endpointId}/deliveries`, { token });
    expect(res.status).toBe(200);
    const list = res.body.deliveries as DeliveryView[];
    if (done(list)) return list;
    if (Date.now() > deadline)
      throw new Error(`deliveries of ${endpointId}: condition not met: ${JSON.stringify(list)}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

async function attemptRows(deliveryId: string) {
  const { results } = await env.DB.prepare(
    "SELECT attempt, status_code AS statusCode, error FROM webhook_attempts WHERE delivery_id = ? ORDER BY id",
  )
    .bind(deliveryId)
    .all<{ attempt: number; statusCode: number | null; error: string | null }>();
  return results;
}

const redeliver = async (endpointId: string, deliveryId: string) =>
  api("POST", `/settings/webhooks/${endpointId}/deliveries/${deliveryId}/redeliver`, { token: await consoleToken() });

describe("every emitted event kind reaches a local receiver, signed per spec", () => {
  it("charge.created, payment.succeeded, charge.succeeded, approval.required, paylink.accepted, budget.exhausted", async () => {
    const merchantName = `Kinds Co ${RUN}`;
    const merchant = await createMerchant({ name: merchantName });
    const name = hook("ok", "kinds");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId });
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1000 } });

    // A wallet payment: charge.created, payment.succeeded, charge.succeeded.
    const paid = await createCharge(merchant.apiKey, 300);
    expect((await payCharge(agent.apiKey, paid.chargeId)).status).toBe(200);
    // Above the approval threshold: charge.created, approval.required; granting it pays (payment.succeeded, charge.succeeded).
    const held = await createCharge(merchant.apiKey, 2000);
    const hold = await payCharge(agent.apiKey, held.chargeId);
    expect(hold.status).toBe(402);
    const approvalId = hold.body.approvalId as string;
    // A PayLink accepted (paylink.accepted) and drawn to its budget (budget.exhausted).
    const pl = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 150 } });
    expect(pl.status).toBe(201);
    const accepted = await api("POST", `/pl/${pl.body.code}/accept`, { token: agent.apiKey });
    expect(accepted.status).toBe(200);
    const draw = await api("POST", `/merchant/paylinks/${pl.body.code}/charge`, {
      token: merchant.apiKey,
      body: { agentId: agent.agentId, amountUsdCents: 150 },
    });
    expect(draw.status).toBe(200);
    expect(draw.body.exhausted).toBe(true);
    const drawnChargeId = draw.body.charge.chargeId as string;
    // Wait for the approval's event before granting it, so both orders of arrival are covered by the checks below.
    await waitForReceived(name, (list) => envelopes(list).some((e) => e.type === "approval.required"));
    const granted = await api("POST", `/approvals/${approvalId}/grant`, { token: await consoleToken() });
    expect(granted.status).toBe(200);

    const has = (list: Envelope[], type: string, key: string, value: unknown) =>
      list.some((e) => e.type === type && e.data[key] === value);
    const got = await waitForReceived(name, (list) => {
      const e = envelopes(list);
      return (
        has(e, "charge.created", "chargeId", paid.chargeId) &&
        has(e, "charge.created", "chargeId", held.chargeId) &&
        has(e, "charge.created", "chargeId", drawnChargeId) &&
        has(e, "payment.succeeded", "chargeId", paid.chargeId) &&
        has(e, "charge.succeeded", "chargeId", paid.chargeId) &&
        has(e, "payment.succeeded", "chargeId", held.chargeId) &&
        has(e, "charge.succeeded", "chargeId", held.chargeId) &&
        has(e, "charge.succeeded", "chargeId", drawnChargeId) &&
        has(e, "approval.required", "approvalId", approvalId) &&
        has(e, "paylink.accepted", "grantId", accepted.body.grantId) &&
        has(e, "budget.exhausted", "paylinkId", pl.body.paylinkId)
      );
    });

    // Every delivery: the headers, the envelope, and a signature the independent verifier accepts.
    const nowSeconds = Math.floor(Date.now() / 1000);
    for (const delivery of got) {
      const envelope = envelopeOf(delivery);
      expect(Object.keys(envelope).sort()).toEqual(["createdAt", "data", "id", "type"]);
      expect(envelope.id).toMatch(/^evt_wh_/);
      expect(envelope.createdAt).toMatch(ISO);
      expect(typeof envelope.data).toBe("object");
      expect(delivery.headers["x-service-event"]).toBe(envelope.type);
      expect(delivery.headers["content-type"]).toMatch(/^application\/json/);
      const header = delivery.headers["x-service-signature"]!;
      expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(Math.abs(nowSeconds - Number(parseSignatureHeader(header)!.t))).toBeLessThanOrEqual(300);
      expect(await verifiesPerSpec(endpoint.secret, delivery)).toBe(true);
      // The verifier can fail: another secret, or one changed byte of the body.
      expect(await verifiesPerSpec(`${endpoint.secret}x`, delivery)).toBe(false);
      expect(
        await verifiesPerSpec(endpoint.secret, {
          ...delivery,
          body: delivery.body.replace(envelope.id, `${envelope.id}0`),
        }),
      ).toBe(false);
    }
    // Distinct events carry distinct envelope ids, and all are this merchant's.
    const all = envelopes(got);
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);

    const find = (type: string, key: string, value: unknown) =>
      all.find((e) => e.type === type && e.data[key] === value)!.data;
    expect(find("charge.created", "chargeId", paid.chargeId)).toMatchObject({
      chargeId: paid.chargeId,
      amountMinor: 300,
      merchantName,
    });
    expect(find("charge.created", "chargeId", held.chargeId)).toMatchObject({
      chargeId: held.chargeId,
      amountMinor: 2000,
      merchantName,
    });
    expect(find("charge.created", "chargeId", drawnChargeId)).toMatchObject({
      chargeId: drawnChargeId,
      amountMinor: 150,
      merchantName,
    });

    const payment = find("payment.succeeded", "chargeId", paid.chargeId);
    expect(payment).toMatchObject({
      chargeId: paid.chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 300,
      currency: "USD",
      method: "ledger",
      reference: expect.stringMatching(/^PAY_/),
    });
    // charge.succeeded carries the same fields as payment.succeeded.
    expect(find("charge.succeeded", "chargeId", paid.chargeId)).toMatchObject(payment);

    // After a granted approval.
    const afterGrant = find("payment.succeeded", "chargeId", held.chargeId);
    expect(afterGrant).toMatchObject({
      chargeId: held.chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 2000,
      currency: "USD",
      method: expect.any(String),
      reference: expect.any(String),
    });
    expect(find("charge.succeeded", "chargeId", held.chargeId)).toMatchObject(afterGrant);

    // A PayLink draw is a payment by another method.
    expect(find("charge.succeeded", "chargeId", drawnChargeId)).toMatchObject({
      chargeId: drawnChargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 150,
      currency: "USD",
      method: "paylink",
      reference: expect.any(String),
    });

    const approval = find("approval.required", "approvalId", approvalId);
    expect(approval).toMatchObject({
      approvalId,
      reason: hold.body.reason ?? expect.any(String),
      expiresAt: expect.stringMatching(ISO),
    });
    expect(approval.reason).toEqual(expect.any(String));
    expect(Date.parse(approval.expiresAt as string)).toBeGreaterThan(Date.now());

    expect(find("paylink.accepted", "grantId", accepted.body.grantId)).toMatchObject({
      grantId: accepted.body.grantId,
      paylinkId: pl.body.paylinkId,
      agentId: agent.agentId,
    });
    expect(find("budget.exhausted", "paylinkId", pl.body.paylinkId)).toMatchObject({
      paylinkId: pl.body.paylinkId,
      spentMinor: 150,
    });

    // The deliveries list agrees: every one delivered at the first attempt.
    const deliveries = await waitForDeliveries(
      endpoint.id,
      (list) => list.length >= got.length && list.every((d) => d.status === "delivered"),
    );
    expect(new Set(deliveries.map((d) => d.eventId))).toEqual(new Set(all.map((e) => e.id)));
    for (const d of deliveries)
      expect(d).toMatchObject({
        status: "delivered",
        attempts: 1,
        lastStatusCode: 200,
        lastError: null,
        nextAttemptAt: null,
        deliveredAt: expect.stringMatching(ISO),
      });
  });
});

describe("filtering", () => {
  it("by kind and by merchant: a merchant's endpoint gets none of another merchant's events; a service-wide one gets both", async () => {
    const a = await createMerchant({ name: `Filter A ${RUN}` });
    const b = await createMerchant({ name: `Filter B ${RUN}` });
    const onlyCreatedA = await registerEndpoint(hook("ok", "created-a"), {
      merchantId: a.merchantId,
      events: ["charge.created"],
    });
    const allOfA = await registerEndpoint(hook("ok", "all-a"), { merchantId: a.merchantId });
    const succeededOfB = await registerEndpoint(hook("ok", "succeeded-b"), {
      merchantId: b.merchantId,
      events: ["charge.succeeded", "payment.succeeded"],
    });
    const wideName = hook("ok", "wide");
    const wide = await registerEndpoint(wideName);
    try {
      const agent = await createAgent({ credit: 1000 });
      const ca = await createCharge(a.apiKey, 11);
      const cb = await createCharge(b.apiKey, 22);
      expect((await payCharge(agent.apiKey, ca.chargeId)).status).toBe(200);
      expect((await payCharge(agent.apiKey, cb.chargeId)).status).toBe(200);

      // The service-wide endpoint gets both merchants' events: it is the control that fan-out has happened.
      const wideGot = await waitForReceived(wideName, (list) => {
        const e = envelopes(list);
        return [ca.chargeId, cb.chargeId].every((id) =>
          ["charge.created", "payment.succeeded", "charge.succeeded"].every((t) =>
            e.some((x) => x.type === t && x.data.chargeId === id),
          ),
        );
      });
      const eventIdsOf = (chargeId: string) =>
        envelopes(wideGot)
          .filter((e) => e.data.chargeId === chargeId)
          .map((e) => ({ id: e.id, type: e.type }));
      const eventsA = eventIdsOf(ca.chargeId);
      const eventsB = eventIdsOf(cb.chargeId);
      expect(eventsA).toHaveLength(3);
      expect(eventsB).toHaveLength(3);

      // Fan-out writes every endpoint's delivery of one event in one batch, so the rows are final now.
      const rowsOf = async (endpointId: string) =>
        (
          await env.DB.prepare("SELECT event_id AS eventId, type FROM webhook_deliveries WHERE endpoint_id = ?")
            .bind(endpointId)
            .all<{ eventId: string; type: string }>()
        ).results;
      const sortIds = (list: { id?: string; eventId?: string }[]) => list.map((x) => x.id ?? x.eventId).sort();
      expect(sortIds(await rowsOf(allOfA.id))).toEqual(sortIds(eventsA));
      expect(sortIds(await rowsOf(onlyCreatedA.id))).toEqual(
        sortIds(eventsA.filter((e) => e.type === "charge.created")),
      );
      expect(sortIds(await rowsOf(succeededOfB.id))).toEqual(
        sortIds(eventsB.filter((e) => e.type !== "charge.created")),
      );

      // And what the receivers actually got.
      const gotAllA = await waitForReceived(hook("ok", "all-a"), (list) => list.length >= 3);
      expect(envelopes(gotAllA).map((e) => e.data.chargeId)).toEqual([ca.chargeId, ca.chargeId, ca.chargeId]);
      expect(gotAllA.some((d) => d.body.includes(cb.chargeId))).toBe(false);
      const gotCreatedA = await waitForReceived(hook("ok", "created-a"), (list) => list.length >= 1);
      expect(envelopes(gotCreatedA).map((e) => [e.type, e.data.chargeId])).toEqual([["charge.created", ca.chargeId]]);
      const gotB = await waitForReceived(hook("ok", "succeeded-b"), (list) => list.length >= 2);
      expect(
        envelopes(gotB)
          .map((e) => e.type)
          .sort(),
      ).toEqual(["charge.succeeded", "payment.succeeded"]);
      expect(envelopes(gotB).every((e) => e.data.chargeId === cb.chargeId)).toBe(true);
    } finally {
      // A service-wide endpoint would receive every later event of this file.
      await api("DELETE", `/settings/webhooks/${wide.id}`, { token: await consoleToken() });
    }
  });
});

// Concurrent: each test has its own merchant and hooks, and most wait on the retry schedule.
describe.concurrent("retries, failures, redelivery, and secrets on every path", () => {
  it("a receiver failing twice then answering 200 gets the same envelope three times; the list shows delivered after 3 attempts", async () => {
    const merchant = await createMerchant();
    const name = hook("fail2", "retries");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const charge = await createCharge(merchant.apiKey, 10);
    const got = await waitForReceived(name, (list) => list.length >= 3);
    const ids = envelopes(got).map((e) => e.id);
    expect(new Set(ids).size).toBe(1);
    // The same bytes every time; each attempt freshly signed.
    expect(new Set(got.map((d) => d.body)).size).toBe(1);
    expect(envelopeOf(got[0]!).data.chargeId).toBe(charge.chargeId);
    for (const d of got) expect(await verifiesPerSpec(endpoint.secret, d)).toBe(true);

    const [delivery, ...others] = await waitForDeliveries(endpoint.id, (list) => list[0]?.status === "delivered");
    expect(others).toEqual([]);
    expect(Object.keys(delivery!).sort()).toEqual([
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
    expect(delivery).toMatchObject({
      eventId: ids[0],
      type: "charge.created",
      status: "delivered",
      attempts: 3,
      lastStatusCode: 200,
      lastError: null,
      nextAttemptAt: null,
      createdAt: expect.stringMatching(ISO),
      deliveredAt: expect.stringMatching(ISO),
    });
    expect(await attemptRows(delivery!.id)).toEqual([
      { attempt: 1, statusCode: 500, error: "http_500" },
      { attempt: 2, statusCode: 500, error: "http_500" },
      { attempt: 3, statusCode: 200, error: null },
    ]);
    // Nothing more arrives for a delivered event.
    expect((await received(name)).length).toBe(3);
  });

  it("a receiver that never answers 2xx: failed after 5 attempts, each recorded; a redelivery answers 202 and attempts again", async () => {
    const merchant = await createMerchant();
    const name = hook("fail", "always");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    await createCharge(merchant.apiKey, 10);
    const [delivery] = await waitForDeliveries(endpoint.id, (list) => list[0]?.status === "failed");
    expect(delivery).toMatchObject({
      type: "charge.created",
      status: "failed",
      attempts: 5,
      lastStatusCode: 500,
      lastError: "http_500",
      nextAttemptAt: null,
      deliveredAt: null,
    });
    const rows = await attemptRows(delivery!.id);
    expect(rows).toEqual([1, 2, 3, 4, 5].map((attempt) => ({ attempt, statusCode: 500, error: "http_500" })));
    const got = await received(name);
    expect(got).toHaveLength(5);
    expect(new Set(envelopes(got).map((e) => e.id))).toEqual(new Set([delivery!.eventId]));

    // Redelivery of the failed (dead-lettered) delivery: 202, and new attempts are made and recorded.
    const res = await redeliver(endpoint.id, delivery!.id);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ id: delivery!.id, status: "pending" });
    const again = await waitForReceived(name, (list) => list.length >= 6);
    expect(new Set(envelopes(again).map((e) => e.id))).toEqual(new Set([delivery!.eventId]));
    const grown = await waitFor(
      "attempt rows after redelivery",
      () => attemptRows(delivery!.id),
      (r) => r.length === 10,
    );
    expect(grown.every((r) => r.statusCode === 500)).toBe(true);
    // It runs its schedule again and ends failed again (not flipped by the dead-letter consumer midway).
    const [final] = await waitForDeliveries(
      endpoint.id,
      (list) => list[0]?.status === "failed" && (list[0]?.attempts ?? 0) >= 5,
    );
    expect(final).toMatchObject({ id: delivery!.id, status: "failed", lastStatusCode: 500 });
  });

  it("redelivery: 409 delivery_not_redeliverable for a pending delivery; 404 for an unknown one, another endpoint's, or an unknown endpoint; 202 for a delivered one", async () => {
    const merchant = await createMerchant();
    const name = hook("ok", "redeliver");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const other = await registerEndpoint(hook("ok", "redeliver-other"), {
      merchantId: merchant.merchantId,
      events: ["deposit.confirmed"],
    });
    await createCharge(merchant.apiKey, 10);
    const [delivered] = await waitForDeliveries(endpoint.id, (list) => list[0]?.status === "delivered");

    // A pending delivery (written directly, its due time far ahead, so no consumer takes it meanwhile).
    const pendingId = `whd_test_pending_${RUN}`;
    await env.DB.prepare(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, type, status, attempts, next_attempt_at, created_at)
       VALUES (?, ?, ?, 'charge.created', 'pending', 0, '2999-01-01T00:00:00.000Z', ?)`,
    )
      .bind(pendingId, `evt_wh_test_pending_${RUN}`, endpoint.id, new Date().toISOString())
      .run();
    const pending = await redeliver(endpoint.id, pendingId);
    expect(pending.status).toBe(409);
    expect(pending.body.error).toBe("delivery_not_redeliverable");
    const stillPending = await env.DB.prepare("SELECT status, attempts FROM webhook_deliveries WHERE id = ?")
      .bind(pendingId)
      .first();
    expect(stillPending).toEqual({ status: "pending", attempts: 0 });

    // The contract: 404 for an unknown delivery or one of another endpoint (was 409 delivery_not_redeliverable).
    const unknown = await redeliver(endpoint.id, `whd_nope_${RUN}`);
    expect(unknown.status, unknown.text).toBe(404);
    expect(unknown.body).toEqual({ error: "delivery_not_found" });
    const wrongEndpoint = await redeliver(other.id, delivered!.id);
    expect(wrongEndpoint.status, wrongEndpoint.text).toBe(404);
    expect(wrongEndpoint.body).toEqual({ error: "delivery_not_found" });
    const unknownEndpoint = await redeliver(`wh_nope_${RUN}`, delivered!.id);
    expect(unknownEndpoint.status, unknownEndpoint.text).toBe(404);
    expect(unknownEndpoint.body).toEqual({ error: "webhook_endpoint_not_found" });
    // None of them touched the delivered one.
    expect(
      await env.DB.prepare("SELECT status, attempts FROM webhook_deliveries WHERE id = ?").bind(delivered!.id).first(),
    ).toEqual({ status: "delivered", attempts: 1 });

    // A delivered one can be sent again: the same envelope id arrives a second time.
    const res = await redeliver(endpoint.id, delivered!.id);
    expect(res.status).toBe(202);
    const got = await waitForReceived(name, (list) => list.length >= 2);
    expect(envelopes(got).map((e) => e.id)).toEqual([delivered!.eventId, delivered!.eventId]);
    await waitForDeliveries(endpoint.id, (list) => list.find((d) => d.id === delivered!.id)?.status === "delivered");
  });

  it("a receiver slower than the timeout: the attempt is recorded with lastError timeout", async () => {
    const merchant = await createMerchant();
    const name = hook("slow", "timeout");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    await createCharge(merchant.apiKey, 10);
    const [delivery] = await waitForDeliveries(endpoint.id, (list) => (list[0]?.attempts ?? 0) >= 1);
    expect(delivery).toMatchObject({ lastError: "timeout", lastStatusCode: null, deliveredAt: null });
    expect(["pending", "failed"]).toContain(delivery!.status);
    const [first] = await attemptRows(delivery!.id);
    expect(first).toEqual({ attempt: 1, statusCode: null, error: "timeout" });
    // The receiver did get the request (it just answered too late).
    expect((await received(name)).length).toBeGreaterThanOrEqual(1);
    // Stop the remaining attempts of this test's endpoint.
    expect((await api("DELETE", `/settings/webhooks/${endpoint.id}`, { token: await consoleToken() })).status).toBe(
      200,
    );
  });

  it("a redirect is never followed: the target gets nothing, lastStatusCode 302, and the delivery ends failed", async () => {
    const merchant = await createMerchant();
    const name = hook("redirect", "away");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    await createCharge(merchant.apiKey, 10);
    const [delivery] = await waitForDeliveries(endpoint.id, (list) => list[0]?.status === "failed");
    expect(delivery).toMatchObject({
      status: "failed",
      attempts: 5,
      lastStatusCode: 302,
      lastError: "http_302",
      deliveredAt: null,
    });
    expect((await attemptRows(delivery!.id)).map((r) => r.statusCode)).toEqual([302, 302, 302, 302, 302]);
    expect(await received(name)).toHaveLength(5);
    // The redirect target (/hooks/ok-redirected on the same receiver) was never requested.
    expect(await received("ok-redirected")).toEqual([]);
  });

  it("no secret appears in the endpoint list, the deliveries list, the delivered requests or the logs", async () => {
    const spies = (["log", "info", "warn", "error", "debug"] as const).map((level) => vi.spyOn(console, level));
    try {
      const merchant = await createMerchant();
      const name = hook("ok", "secret-check");
      const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId });
      const token = await consoleToken();
      const rotated = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, {
        token,
        body: { graceSeconds: 600 },
      });
      expect(rotated.status).toBe(200);
      const failing = await registerEndpoint(hook("fail", "secret-check"), {
        merchantId: merchant.merchantId,
        events: ["charge.created"],
      });
      await createCharge(merchant.apiKey, 10);
      const got = await waitForReceived(name, (list) => list.length >= 1);
      await waitForDeliveries(failing.id, (list) => list[0]?.status === "failed");
      const list = await api("GET", "/settings/webhooks", { token });
      const deliveries = await api("GET", `/settings/webhooks/${endpoint.id}/deliveries`, { token });
      const failedDeliveries = await api("GET", `/settings/webhooks/${failing.id}/deliveries`, { token });
      const logs = JSON.stringify(spies.flatMap((spy) => spy.mock.calls));
      const texts = {
        list: list.text,
        deliveries: deliveries.text,
        failedDeliveries: failedDeliveries.text,
        received: JSON.stringify(got),
        logs,
      };
      for (const secret of [endpoint.secret, rotated.body.secret, failing.secret]) {
        const body = secret.slice("whsec_".length);
        for (const [where, text] of Object.entries(texts))
          expect(text.includes(body), `secret in ${where}`).toBe(false);
      }
      expect(list.text).not.toContain("whsec_");
      expect(list.body.endpoints.find((e: { id: string }) => e.id === endpoint.id)).toEqual({
        id: endpoint.id,
        url: `${receiverUrl()}/hooks/${name}`,
        events: [],
        merchantId: merchant.merchantId,
        createdAt: expect.stringMatching(ISO),
      });
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });
});

describe.concurrent("secret rotation", () => {
  it("during the grace period the next delivery carries two v1 signatures: one under the old secret, one under the new", async () => {
    const merchant = await createMerchant();
    const name = hook("ok", "rotation");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const before = Date.now();
    const rotated = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, {
      token: await consoleToken(),
      body: { graceSeconds: 3600 },
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.id).toBe(endpoint.id);
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43,}$/);
    expect(rotated.body.secret).not.toBe(endpoint.secret);
    const expiry = Date.parse(rotated.body.previousSecretExpiresAt);
    expect(expiry).toBeGreaterThanOrEqual(before + 3600_000 - 5_000);
    expect(expiry).toBeLessThanOrEqual(Date.now() + 3600_000 + 5_000);

    await createCharge(merchant.apiKey, 10);
    const [delivery] = await waitForReceived(name, (list) => list.length >= 1);
    expect(delivery!.headers["x-service-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    const underOld = await v1Matches(endpoint.secret, delivery!);
    const underNew = await v1Matches(rotated.body.secret, delivery!);
    expect(underOld.filter(Boolean)).toHaveLength(1);
    expect(underNew.filter(Boolean)).toHaveLength(1);
    // Different entries: one signed by each secret.
    expect(underOld.findIndex(Boolean)).not.toBe(underNew.findIndex(Boolean));
    expect(await verifiesPerSpec(endpoint.secret, delivery!)).toBe(true);
    expect(await verifiesPerSpec(rotated.body.secret, delivery!)).toBe(true);
  });

  it("with graceSeconds 0 only the new secret signs (and an earlier grace is cut short)", async () => {
    const merchant = await createMerchant();
    const name = hook("ok", "rotation-now");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const token = await consoleToken();
    const first = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, {
      token,
      body: { graceSeconds: 3600 },
    });
    expect(first.status).toBe(200);
    const second = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, {
      token,
      body: { graceSeconds: 0 },
    });
    expect(second.status).toBe(200);
    expect(second.body.previousSecretExpiresAt).toBeNull();
    expect(new Set([endpoint.secret, first.body.secret, second.body.secret]).size).toBe(3);

    await createCharge(merchant.apiKey, 10);
    const [delivery] = await waitForReceived(name, (list) => list.length >= 1);
    expect(delivery!.headers["x-service-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(await verifiesPerSpec(second.body.secret, delivery!)).toBe(true);
    expect(await verifiesPerSpec(first.body.secret, delivery!)).toBe(false);
    expect(await verifiesPerSpec(endpoint.secret, delivery!)).toBe(false);
  });

  it("rotating an unknown endpoint is 404; a negative grace is 400", async () => {
    const token = await consoleToken();
    expect(
      (await api("POST", `/settings/webhooks/wh_nope_${RUN}/rotate-secret`, { token, body: { graceSeconds: 0 } }))
        .status,
    ).toBe(404);
    const merchant = await createMerchant();
    const endpoint = await registerEndpoint(hook("ok", "rotation-bad"), {
      merchantId: merchant.merchantId,
      events: ["deposit.confirmed"],
    });
    const bad = await api("POST", `/settings/webhooks/${endpoint.id}/rotate-secret`, {
      token,
      body: { graceSeconds: -1 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe("invalid_request");
  });
});

describe("exactly-once fan-out", () => {
  it("a backlog of more events than D1 binds in one statement fans out in full pages", async () => {
    // Over 100 undispatched events: the page's ids once went into one statement as 102 bound values, which D1 refuses.
    const merchant = await createMerchant();
    const name = hook("ok", "fanout-backlog");
    const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
    const createdAt = new Date(Date.now() - 60_000).toISOString();
    const ids = Array.from({ length: 150 }, (_, i) => `evt_wh_backlog_${RUN}_${String(i).padStart(3, "0")}`);
    await env.DB.batch(
      ids.map((id, i) =>
        env.DB.prepare(
          "INSERT INTO outbox_events (id, type, merchant_id, data, created_at) VALUES (?, 'charge.created', ?, ?, ?)",
        ).bind(id, merchant.merchantId, JSON.stringify({ chargeId: `chg_backlog_${RUN}_${i}` }), createdAt),
      ),
    );
    await dispatchOutbox(env);
    const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = ?")
      .bind(endpoint.id)
      .first<{ n: number }>();
    expect(rows!.n).toBe(ids.length);
    const left = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM outbox_events WHERE id IN (SELECT value FROM json_each(?)) AND dispatched_at IS NULL",
    )
      .bind(JSON.stringify(ids))
      .first<{ n: number }>();
    expect(left!.n).toBe(0);
  });

  it("each (event, endpoint) pair gets exactly one delivery row when dispatchers run concurrently", async () => {
    const merchant = await createMerchant();
    const other = await createMerchant();
    const allName = hook("ok", "fanout-all");
    const all = await registerEndpoint(allName, { merchantId: merchant.merchantId });
    const createdOnly = await registerEndpoint(hook("ok", "fanout-created"), {
      merchantId: merchant.merchantId,
      events: ["charge.created"],
    });
    const otherMerchant = await registerEndpoint(hook("ok", "fanout-other"), { merchantId: other.merchantId });

    // Outbox events written directly, as a write would, then raced for by several dispatchers.
    const N = 24;
    const createdAt = new Date().toISOString();
    const events = Array.from({ length: N }, (_, i) => ({
      id: `evt_wh_fanout_${RUN}_${String(i).padStart(2, "0")}`,
      type: i % 3 === 0 ? "charge.succeeded" : "charge.created",
    }));
    await env.DB.batch(
      events.map((e, i) =>
        env.DB.prepare(
          "INSERT INTO outbox_events (id, type, merchant_id, data, created_at) VALUES (?, ?, ?, ?, ?)",
        ).bind(
          e.id,
          e.type,
          merchant.merchantId,
          JSON.stringify({ chargeId: `chg_fanout_${RUN}_${i}`, amountMinor: i + 1 }),
          createdAt,
        ),
      ),
    );
    const results = await Promise.all([
      fanOutOutbox(env),
      dispatchOutbox(env),
      fanOutOutbox(env),
      dispatchOutbox(env),
      fanOutOutbox(env),
      dispatchOutbox(env),
      fanOutOutbox(env),
      dispatchOutbox(env),
    ]);
    // Deliveries created by the bare fan-outs are not enqueued by them: enqueue those, as the caller would.
    const fannedOut = results.filter((r): r is string[] => Array.isArray(r)).flat();
    expect(new Set(fannedOut).size).toBe(fannedOut.length);
    await enqueueDeliveries(env, fannedOut);

    const placeholders = events.map(() => "?").join(", ");
    const { results: rows } = await env.DB.prepare(
      `SELECT id, event_id AS eventId, endpoint_id AS endpointId FROM webhook_deliveries WHERE event_id IN (${placeholders})`,
    )
      .bind(...events.map((e) => e.id))
      .all<{ id: string; eventId: string; endpointId: string }>();
    const pairs = rows.map((r) => `${r.eventId}|${r.endpointId}`);
    expect(new Set(pairs).size).toBe(pairs.length);
    const expected = [
      ...events.map((e) => `${e.id}|${all.id}`),
      ...events.filter((e) => e.type === "charge.created").map((e) => `${e.id}|${createdOnly.id}`),
    ].sort();
    expect(pairs.sort()).toEqual(expected);
    expect(rows.some((r) => r.endpointId === otherMerchant.id)).toBe(false);
    // Every id a bare fan-out returned is one of those rows (no caller got a row another also created).
    const rowIds = new Set(rows.map((r) => r.id));
    for (const id of fannedOut) expect(rowIds.has(id)).toBe(true);
    // All events are marked dispatched.
    const undispatched = await env.DB.prepare(
      `SELECT COUNT(*) AS n FROM outbox_events WHERE id IN (${placeholders}) AND dispatched_at IS NULL`,
    )
      .bind(...events.map((e) => e.id))
      .first<{ n: number }>();
    expect(undispatched!.n).toBe(0);

    // And each event reaches the receiver once.
    const got = await waitForReceived(allName, (list) => new Set(envelopes(list).map((e) => e.id)).size >= N);
    expect(
      envelopes(got)
        .map((e) => e.id)
        .sort(),
    ).toEqual(events.map((e) => e.id).sort());
    // Another round of dispatching adds nothing for these events.
    await dispatchOutbox(env);
    const { results: again } = await env.DB.prepare(
      `SELECT COUNT(*) AS n FROM webhook_deliveries WHERE event_id IN (${placeholders})`,
    )
      .bind(...events.map((e) => e.id))
      .all<{ n: number }>();
    expect(again[0]!.n).toBe(expected.length);
  });
});
