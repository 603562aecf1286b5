import { beforeAll, describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { chargesOf, type FacilitatorTerms, facilitatorTerms, settle, v2Request, verify } from "../helpers/facilitator";
import { createMerchant } from "../helpers/factories";
import { freshPayer, randomNonce, tokenBalance } from "../helpers/x402";

/*
 * What an outside attack on the facilitator found, kept found: a settled authorization answers only a
 * request carrying that very authorization; a payment identifier answers only the same price; a
 * replay lists nothing new; only http(s) resources are listed; a stored charge is priced exactly.
 */

const BAZAAR = {
  bazaar: {
    info: { input: { type: "http", method: "GET" }, output: { type: "json" } },
    schema: { type: "object" },
  },
};

/** The merchant's exact balance, as GET /merchant/me states it. */
const baseUnitsOf = async (key: string) =>
  BigInt((await api("GET", "/merchant/me", { token: key })).body.merchant.balanceBaseUnits);

let merchant: { merchantId: string; apiKey: string };
let terms: FacilitatorTerms;

beforeAll(async () => {
  merchant = await createMerchant({ name: "Replay Target Shop" });
  terms = await facilitatorTerms(merchant.apiKey);
});

describe("a settled authorization answers only itself", () => {
  it("another signature on the same nonce, for more, is refused, not told the first one's transaction", async () => {
    const payer = await freshPayer(100_000_000n);
    const nonce = randomNonce();
    const cheap = await v2Request(payer.key, terms, {
      value: 1n,
      resource: "https://api.replay.example/cheap",
      authorization: { nonce },
    });
    const dear = await v2Request(payer.key, terms, {
      value: 40_000_000n,
      resource: "https://api.replay.example/dear",
      authorization: { nonce },
    });
    // Both verify before either settles: each is a valid signature on an unused nonce.
    expect((await verify(merchant.apiKey, cheap)).body.isValid).toBe(true);
    expect((await verify(merchant.apiKey, dear)).body.isValid).toBe(true);
    const before = await baseUnitsOf(merchant.apiKey);
    const first = await settle(merchant.apiKey, cheap);
    expect(first.body, first.text).toMatchObject({ success: true });
    const second = await settle(merchant.apiKey, dear);
    expect(second.body).toMatchObject({ success: false, errorReason: "invalid_exact_evm_nonce_already_used" });
    expect(second.body.transaction).toBe("");
    // The same cheap payload again still answers its own outcome.
    expect((await settle(merchant.apiKey, cheap)).body).toMatchObject({
      success: true,
      transaction: first.body.transaction,
    });
    expect(await baseUnitsOf(merchant.apiKey)).toBe(before + 1n);
    expect(await tokenBalance(payer.address)).toBe(100_000_000n - 1n);
  });

  it("a settled payload altered (value, signature) is refused", async () => {
    const payer = await freshPayer(1_000_000n);
    const body = await v2Request(payer.key, terms, { value: 1000n, resource: "https://api.replay.example/once" });
    expect((await settle(merchant.apiKey, body)).body.success).toBe(true);
    const altered = structuredClone(body);
    altered.paymentPayload.payload.authorization.value = "99000000" as never;
    altered.paymentRequirements.amount = "99000000";
    altered.paymentPayload.accepted.amount = "99000000";
    altered.paymentPayload.payload.signature = `0x${"ab".repeat(65)}`;
    const refused = await settle(merchant.apiKey, altered);
    expect(refused.body.success).toBe(false);
    expect(refused.body.transaction).toBe("");
  });
});

describe("a payment identifier is one purchase at one price", () => {
  it("the same identifier for a dearer route is refused, not answered with the cheap payment", async () => {
    const payer = await freshPayer(100_000_000n);
    const id = { "payment-identifier": { info: { id: `purchase-${crypto.randomUUID()}` } } };
    const cheap = await v2Request(payer.key, terms, {
      value: 1n,
      resource: "https://api.replay.example/id-cheap",
      extensions: id,
    });
    expect((await settle(merchant.apiKey, cheap)).body.success).toBe(true);
    const dear = await v2Request(payer.key, terms, {
      value: 50_000_000n,
      resource: "https://api.replay.example/id-dear",
      extensions: id,
    });
    const answer = await settle(merchant.apiKey, dear);
    expect(answer.body.success).toBe(false);
    expect(answer.body.transaction).toBe("");
    expect(await tokenBalance(payer.address)).toBe(100_000_000n - 1n);
  });
});

describe("discovery lists what was paid", () => {
  it("a replay naming another URL lists nothing; a resource that is not an http(s) URL of at most 2,048 characters is refused", async () => {
    const shop = await createMerchant({ name: "Listing Shop" });
    const shopTerms = await facilitatorTerms(shop.apiKey);
    const payer = await freshPayer(1_000_000n);
    const paid = await v2Request(payer.key, shopTerms, {
      value: 1000n,
      resource: "https://api.listing.example/paid",
      extensions: BAZAAR,
    });
    expect((await settle(shop.apiKey, paid)).body.success).toBe(true);
    const replay = structuredClone(paid);
    replay.paymentPayload.resource.url = "https://never-paid.example/free";
    expect((await settle(shop.apiKey, replay)).body.success).toBe(true);
    const script = await v2Request(payer.key, shopTerms, {
      value: 1000n,
      resource: "javascript:alert(1)",
      extensions: BAZAAR,
    });
    // Not a route's address, or longer than one: not the protocol's shape, refused before anything is paid.
    const scriptAnswer = await settle(shop.apiKey, script);
    expect(scriptAnswer.status, scriptAnswer.text).toBe(400);
    const long = await v2Request(payer.key, shopTerms, {
      value: 1000n,
      resource: `https://api.listing.example/${"a".repeat(2_100)}`,
    });
    expect((await settle(shop.apiKey, long)).status).toBe(400);
    const listed = await api("GET", "/merchant/x402/resources", { token: shop.apiKey });
    expect(listed.body.resources.map((r: { resource: string }) => r.resource)).toEqual([
      "https://api.listing.example/paid",
    ]);
    expect((await chargesOf(shop.apiKey)).length).toBe(1);
    expect(await tokenBalance(payer.address)).toBe(1_000_000n - 1000n);
  });
});
