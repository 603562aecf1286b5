import { describe, expect, it } from "vitest";
import { verifyWebhook } from "../../client/src/webhooks";
import { signatureHeader } from "../../src/webhooks/signing";

/*
 * The verification helper the client ships for receivers (client/src/webhooks.ts).
 * The headers here are signed by the test itself, from docs/api.md (Webhooks)
 * (lowercase hex HMAC-SHA256 with the secret over "<t>.<raw body>"), not by
 * the service's signer, so a shared mistake cannot hide.
 */

const utf8 = new TextEncoder();

async function sign(secret: string, t: number | string, rawBody: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", utf8.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, utf8.encode(`${t}.${rawBody}`)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

const header = async (secret: string, t: number, rawBody: string) => `t=${t},v1=${await sign(secret, t, rawBody)}`;

const secret = "whsec_receiver_test_secret_0123456789abcdefghijklmnop";
const otherSecret = "whsec_another_secret_entirely_0123456789abcdefghijklm";
// A raw body as it goes over the wire, with a non-ASCII character so bytes and characters differ.
const body =
  '{"id":"evt_wh_1","type":"charge.created","createdAt":"2026-06-01T11:59:00.000Z","data":{"chargeId":"chg_1","amountMinor":250,"merchantName":"Café Ñandú"}}';
const now = Date.parse("2026-06-01T12:00:00Z");
const t = Math.floor(now / 1000);

describe("verifyWebhook", () => {
  it("accepts a valid signature and returns its timestamp", async () => {
    expect(await verifyWebhook({ secret, header: await header(secret, t, body), rawBody: body, now })).toEqual({
      ok: true,
      timestamp: t,
    });
  });

  it("accepts a valid signature checked against the real clock when no `now` is given", async () => {
    const current = Math.floor(Date.now() / 1000);
    expect(await verifyWebhook({ secret, header: await header(secret, current, body), rawBody: body })).toEqual({
      ok: true,
      timestamp: current,
    });
  });

  it("refuses a signature made with another secret", async () => {
    expect(await verifyWebhook({ secret, header: await header(otherSecret, t, body), rawBody: body, now })).toEqual({
      ok: false,
      reason: "no_matching_signature",
    });
    expect(
      await verifyWebhook({ secret: otherSecret, header: await header(secret, t, body), rawBody: body, now }),
    ).toEqual({ ok: false, reason: "no_matching_signature" });
  });

  it("refuses a tampered body, including the same JSON re-serialized", async () => {
    const h = await header(secret, t, body);
    const refused = { ok: false, reason: "no_matching_signature" };
    expect(
      await verifyWebhook({ secret, header: h, rawBody: body.replace('"amountMinor":250', '"amountMinor":251'), now }),
    ).toEqual(refused);
    expect(await verifyWebhook({ secret, header: h, rawBody: `${body} `, now })).toEqual(refused);
    // Parsed and serialized again is not the raw body (the bytes signed are the bytes received).
    expect(await verifyWebhook({ secret, header: h, rawBody: JSON.stringify(JSON.parse(body), null, 2), now })).toEqual(
      refused,
    );
  });

  it("refuses a signature whose t was changed (t is part of what is signed)", async () => {
    const v1 = await sign(secret, t, body);
    expect(await verifyWebhook({ secret, header: `t=${t + 1},v1=${v1}`, rawBody: body, now })).toEqual({
      ok: false,
      reason: "no_matching_signature",
    });
  });

  it("refuses a missing header", async () => {
    for (const missing of [null, undefined, ""]) {
      expect(await verifyWebhook({ secret, header: missing, rawBody: body, now })).toEqual({
        ok: false,
        reason: "missing_header",
      });
    }
  });

  it("refuses malformed headers", async () => {
    const v1 = await sign(secret, t, body);
    const malformed = [
      `v1=${v1}`, // no t
      `t=${t}`, // no v1
      `t=abc,v1=${v1}`, // t not a number
      `t=${t},v1=nothex`,
      `t=${t},v1=${v1.slice(0, 63)}`, // too short
      `t=${t},v0=${v1}`, // unknown scheme only
      "garbage",
      `${t},${v1}`,
    ];
    for (const h of malformed) {
      expect(await verifyWebhook({ secret, header: h, rawBody: body, now }), h).toEqual({
        ok: false,
        reason: "malformed_header",
      });
    }
  });

  it("refuses a stale timestamp beyond 300 s, accepts one within it", async () => {
    expect(await verifyWebhook({ secret, header: await header(secret, t - 301, body), rawBody: body, now })).toEqual({
      ok: false,
      reason: "timestamp_out_of_tolerance",
    });
    expect(await verifyWebhook({ secret, header: await header(secret, t - 3600, body), rawBody: body, now })).toEqual({
      ok: false,
      reason: "timestamp_out_of_tolerance",
    });
    expect(await verifyWebhook({ secret, header: await header(secret, t - 299, body), rawBody: body, now })).toEqual({
      ok: true,
      timestamp: t - 299,
    });
  });

  it("refuses a timestamp in the future beyond 300 s, accepts one within it", async () => {
    expect(await verifyWebhook({ secret, header: await header(secret, t + 301, body), rawBody: body, now })).toEqual({
      ok: false,
      reason: "timestamp_out_of_tolerance",
    });
    expect(await verifyWebhook({ secret, header: await header(secret, t + 299, body), rawBody: body, now })).toEqual({
      ok: true,
      timestamp: t + 299,
    });
  });

  it("honours a custom tolerance both ways", async () => {
    const old = await header(secret, t - 400, body);
    expect((await verifyWebhook({ secret, header: old, rawBody: body, now })).ok).toBe(false);
    expect(await verifyWebhook({ secret, header: old, rawBody: body, now, toleranceSeconds: 600 })).toEqual({
      ok: true,
      timestamp: t - 400,
    });
    const recent = await header(secret, t - 30, body);
    expect((await verifyWebhook({ secret, header: recent, rawBody: body, now })).ok).toBe(true);
    expect(await verifyWebhook({ secret, header: recent, rawBody: body, now, toleranceSeconds: 10 })).toEqual({
      ok: false,
      reason: "timestamp_out_of_tolerance",
    });
  });

  it("with two v1 entries (a rotation), accepts when only the second matches, or only the first; refuses when neither does", async () => {
    const mine = await sign(secret, t, body);
    const theirs = await sign(otherSecret, t, body);
    expect(await verifyWebhook({ secret, header: `t=${t},v1=${theirs},v1=${mine}`, rawBody: body, now })).toEqual({
      ok: true,
      timestamp: t,
    });
    expect(await verifyWebhook({ secret, header: `t=${t},v1=${mine},v1=${theirs}`, rawBody: body, now })).toEqual({
      ok: true,
      timestamp: t,
    });
    const third = await sign("whsec_third", t, body);
    expect(await verifyWebhook({ secret, header: `t=${t},v1=${theirs},v1=${third}`, rawBody: body, now })).toEqual({
      ok: false,
      reason: "no_matching_signature",
    });
  });

  it("tolerates spaces after the commas and ignores unknown schemes beside v1", async () => {
    const v1 = await sign(secret, t, body);
    expect((await verifyWebhook({ secret, header: `t=${t}, v1=${v1}`, rawBody: body, now })).ok).toBe(true);
    expect((await verifyWebhook({ secret, header: `t=${t},v0=deadbeef,v1=${v1}`, rawBody: body, now })).ok).toBe(true);
  });
});

describe("the service's signer agrees with the spec", () => {
  it("signatureHeader writes t=<t>,v1=<hex> per secret, byte for byte what the spec computes", async () => {
    const h = await signatureHeader([secret, otherSecret], t, body);
    expect(h).toBe(`t=${t},v1=${await sign(secret, t, body)},v1=${await sign(otherSecret, t, body)}`);
    expect(await verifyWebhook({ secret: otherSecret, header: h, rawBody: body, now })).toEqual({
      ok: true,
      timestamp: t,
    });
  });
});
