import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { verifyReceipt } from "../../client/src/receipts";
import { signJws } from "../../src/proofs/keys";
import { api } from "../helpers/api";
import { paidCharge } from "../helpers/money-out";
import { TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";

/*
 * The client's verifyReceipt (client/src/receipts.ts): a receipt from the service checks offline
 * against the published key set, given as JSON or fetched once from the service; anything altered,
 * signed by an unpublished key or not a receipt is refused with a reason.
 */

/** A fetch into this Worker that counts the key-set requests it carries. */
function countingFetch() {
  const calls: string[] = [];
  const fetcher = (async (input: RequestInfo | URL) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    calls.push(url.pathname);
    return exports.default.fetch(new Request(`http://service.test${url.pathname}`));
  }) as typeof fetch;
  return { calls, fetcher };
}

async function receiptOfPaidCharge() {
  const { chargeId, agent } = await paidCharge(321);
  const res = await api("GET", `/charges/${chargeId}/receipt`);
  expect(res.status).toBe(200);
  return { receipt: res.body.receipt as string, chargeId, agentId: agent.agentId };
}

describe("verifyReceipt", () => {
  it("checks a receipt against a given key set and returns its typed payload", async () => {
    const { receipt, chargeId, agentId } = await receiptOfPaidCharge();
    const jwks = (await api("GET", "/.well-known/jwks.json")).body;
    const verdict = await verifyReceipt(receipt, { jwks });
    expect(verdict).toMatchObject({ ok: true, kid: "test-only-receipts-1" });
    if (!verdict.ok || verdict.payload.type !== "charge") throw new Error("expected a charge receipt");
    expect(verdict.payload).toMatchObject({ chargeId, amountMinor: 321, payer: agentId, method: "ledger" });
  });

  it("fetches the published keys once for many receipts from the same service", async () => {
    const { calls, fetcher } = countingFetch();
    const base = `http://once-${crypto.randomUUID()}.test`;
    for (let i = 0; i < 2; i++) {
      const { receipt } = await receiptOfPaidCharge();
      expect((await verifyReceipt(receipt, { baseUrl: base, fetch: fetcher })).ok).toBe(true);
    }
    expect(calls).toEqual(["/.well-known/jwks.json"]);
  });

  it("refuses a changed payload, a key that is not published, and a JWS that is not a receipt", async () => {
    const { receipt } = await receiptOfPaidCharge();
    const jwks = (await api("GET", "/.well-known/jwks.json")).body;
    const [h, p, s] = receipt.split(".");
    const payload = JSON.parse(atob(p!.replace(/-/g, "+").replace(/_/g, "/")));
    const forged = btoa(JSON.stringify({ ...payload, amountMinor: 1 }))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
    expect(await verifyReceipt(`${h}.${forged}.${s}`, { jwks })).toMatchObject({ ok: false });

    const stranger = { signingKey: { ...TEST_RECEIPT_KEYS[1], kid: "stranger" }, publishedKeys: [] };
    const unpublished = await signJws(stranger, "agent-pay-receipt+jwt", payload);
    expect(await verifyReceipt(unpublished, { jwks })).toEqual({
      ok: false,
      reason: "no applicable key found in the JSON Web Key Set",
    });

    const current = { signingKey: { ...TEST_RECEIPT_KEYS[1] }, publishedKeys: [] };
    const notReceipt = await signJws(current, "agent-pay-checkpoint+jwt", payload);
    expect(await verifyReceipt(notReceipt, { jwks })).toMatchObject({
      ok: false,
      reason: expect.stringContaining("typ"),
    });
    const noKind = await signJws(current, "agent-pay-receipt+jwt", { ...payload, type: "coupon" });
    expect(await verifyReceipt(noKind, { jwks })).toEqual({ ok: false, reason: "not a receipt payload" });
    expect(await verifyReceipt("not.a.jws", { jwks })).toMatchObject({ ok: false });
  });

  it("fetches the key set again when a receipt names a key newer than the copy it holds", async () => {
    const { receipt } = await receiptOfPaidCharge();
    const served = (await api("GET", "/.well-known/jwks.json")).body as { keys: { kid: string }[] };
    let rotated = false;
    const calls: number[] = [];
    // Before the rotation the service published only key 0; after it, both.
    const fetcher = (async () => {
      calls.push(1);
      const keys = rotated ? served.keys : served.keys.filter((k) => k.kid === "test-only-receipts-0");
      return new Response(JSON.stringify({ keys }), { headers: { "content-type": "application/json" } });
    }) as typeof fetch;
    const base = `http://rotation-${crypto.randomUUID()}.test`;
    const old = await signJws({ signingKey: { ...TEST_RECEIPT_KEYS[0] }, publishedKeys: [] }, "agent-pay-receipt+jwt", {
      type: "charge",
    });
    expect((await verifyReceipt(old, { baseUrl: base, fetch: fetcher })).ok).toBe(true);
    rotated = true;
    expect(await verifyReceipt(receipt, { baseUrl: base, fetch: fetcher })).toMatchObject({
      ok: true,
      kid: "test-only-receipts-1",
    });
    expect(calls).toHaveLength(2);
  });

  it("a key set the service does not answer is a reason, not a throw", async () => {
    const { receipt } = await receiptOfPaidCharge();
    const down = (async () => new Response("no", { status: 503 })) as typeof fetch;
    expect(await verifyReceipt(receipt, { baseUrl: "http://down.test", fetch: down })).toEqual({
      ok: false,
      reason: "the key set answered 503",
    });
  });
});
