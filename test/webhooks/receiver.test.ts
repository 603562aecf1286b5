import { describe, expect, it } from "vitest";
import { verifyWebhook } from "../../src/webhooks/receiver";
import { signatureHeader } from "../../src/webhooks/signing";

const secret = "whsec_test_secret_for_the_receiver_helper";
const body = JSON.stringify({ id: "evt_wh_1", type: "charge.created", createdAt: "2026-01-01T00:00:00.000Z", data: { chargeId: "chg_1" } });
const now = Date.parse("2026-06-01T12:00:00Z");
const t = Math.floor(now / 1000);

describe("verifyWebhook (the receiver helper)", () => {
  it("accepts a valid signature", async () => {
    expect(await verifyWebhook({ secret, header: await signatureHeader([secret], t, body), rawBody: body, now })).toEqual({ ok: true, timestamp: t });
  });
  it("refuses a wrong secret, a tampered body, a missing or malformed header", async () => {
    const header = await signatureHeader([secret], t, body);
    expect(await verifyWebhook({ secret: "whsec_other", header, rawBody: body, now })).toEqual({ ok: false, reason: "no_matching_signature" });
    expect(await verifyWebhook({ secret, header, rawBody: body.replace("chg_1", "chg_2"), now })).toEqual({ ok: false, reason: "no_matching_signature" });
    expect(await verifyWebhook({ secret, header: null, rawBody: body, now })).toEqual({ ok: false, reason: "missing_header" });
    expect(await verifyWebhook({ secret, header: "v1=abc", rawBody: body, now })).toEqual({ ok: false, reason: "malformed_header" });
  });
  it("refuses a stale or future timestamp beyond the tolerance, and honours a custom one", async () => {
    const old = await signatureHeader([secret], t - 301, body);
    expect(await verifyWebhook({ secret, header: old, rawBody: body, now })).toEqual({ ok: false, reason: "timestamp_out_of_tolerance" });
    const future = await signatureHeader([secret], t + 301, body);
    expect(await verifyWebhook({ secret, header: future, rawBody: body, now })).toEqual({ ok: false, reason: "timestamp_out_of_tolerance" });
    expect((await verifyWebhook({ secret, header: old, rawBody: body, now, toleranceSeconds: 600 })).ok).toBe(true);
  });
  it("accepts when any of two v1 entries matches (a rotation)", async () => {
    const header = await signatureHeader(["whsec_new_secret", secret], t, body);
    expect(header.match(/v1=/g)).toHaveLength(2);
    expect((await verifyWebhook({ secret, header, rawBody: body, now })).ok).toBe(true);
  });
});
