import { beforeAll, describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import {
  chargesOf,
  type FacilitatorTerms,
  facilitatorTerms,
  settle,
  v1Request,
  v2Request,
  verify,
} from "../helpers/facilitator";
import { createMerchant, merchantBalance } from "../helpers/factories";
import { freshPayer, tokenBalance } from "../helpers/x402";

/*
 * Settling through the service as a merchant's facilitator is exactly once per authorization: at
 * once, again after an answer was lost, or under other requirements. And discovery: a route that
 * declared the bazaar extension is listed once a payment for it settled.
 */

const CENT = 10_000n;
const BAZAAR = {
  bazaar: {
    info: { input: { type: "http", method: "GET", queryParams: { symbol: "ETH" } }, output: { type: "json" } },
    schema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { input: { type: "object" }, output: { type: "object" } },
      required: ["input"],
    },
  },
};

describe("settling exactly once", () => {
  let merchant: { merchantId: string; apiKey: string };
  let terms: FacilitatorTerms;
  beforeAll(async () => {
    merchant = await createMerchant({ name: "Once Shop" });
    terms = await facilitatorTerms(merchant.apiKey);
  });

  it("the same payload settled five times at once: one charge, one credit, one transfer, the same transaction", async () => {
    const payer = await freshPayer(1_000_000n);
    const body = await v2Request(payer.key, terms, { value: 3n * CENT, resource: "https://api.once.example/race" });
    const before = {
      balance: await merchantBalance(merchant.apiKey),
      charges: (await chargesOf(merchant.apiKey)).length,
    };
    const answers = await Promise.all(Array.from({ length: 5 }, () => settle(merchant.apiKey, body)));
    for (const answer of answers) expect(answer.status).toBe(200);
    const transaction = answers[0]!.body.transaction as string;
    expect(transaction).toMatch(/^0x[0-9a-f]{64}$/);
    for (const answer of answers)
      expect(answer.body).toEqual({ success: true, transaction, network: expect.any(String), payer: payer.address });
    expect(await merchantBalance(merchant.apiKey)).toBe(before.balance + 3);
    const charges = await chargesOf(merchant.apiKey);
    expect(charges.length).toBe(before.charges + 1);
    expect(charges[0]).toMatchObject({ reference: transaction, amountMinor: 3 });
    expect(await tokenBalance(payer.address)).toBe(1_000_000n - 3n * CENT);
  });

  it("asked again after its answer was lost, or under other requirements: the first outcome, nothing more", async () => {
    const payer = await freshPayer(1_000_000n);
    const body = await v1Request(payer.key, terms, { value: 2n * CENT, resource: "https://api.once.example/lost" });
    const first = await settle(merchant.apiKey, body);
    expect(first.body.success).toBe(true);
    const balance = await merchantBalance(merchant.apiKey);
    const count = (await chargesOf(merchant.apiKey)).length;
    expect((await settle(merchant.apiKey, body)).body).toEqual(first.body);
    const retitled = {
      ...body,
      paymentRequirements: {
        ...body.paymentRequirements,
        description: "another title",
        resource: "https://x.example/",
      },
    };
    expect((await settle(merchant.apiKey, retitled)).body).toEqual(first.body);
    // Verification asks the chain: the authorization is used, so it is no longer valid.
    expect((await verify(merchant.apiKey, body)).body).toMatchObject({ isValid: false });
    expect(await merchantBalance(merchant.apiKey)).toBe(balance);
    expect((await chargesOf(merchant.apiKey)).length).toBe(count);
  });

  it("an authorization settled for one merchant is refused to another, and settles nothing more", async () => {
    const payer = await freshPayer(1_000_000n);
    const body = await v2Request(payer.key, terms, { value: CENT, resource: "https://api.once.example/one" });
    expect((await settle(merchant.apiKey, body)).body.success).toBe(true);
    const thief = await createMerchant({ name: "Replay Shop" });
    const thiefTerms = await facilitatorTerms(thief.apiKey);
    const replayed = {
      ...body,
      paymentRequirements: { ...body.paymentRequirements, payTo: thiefTerms.payTo },
      paymentPayload: {
        ...body.paymentPayload,
        accepted: { ...body.paymentPayload.accepted, payTo: thiefTerms.payTo },
      },
    };
    // Already used for another merchant: refused as a used nonce, and nothing of that payment is shown.
    const answer = await settle(thief.apiKey, replayed);
    expect(answer.body).toMatchObject({ success: false, errorReason: "invalid_exact_evm_nonce_already_used" });
    expect(await merchantBalance(thief.apiKey)).toBe(0);
    expect(await tokenBalance(payer.address)).toBe(1_000_000n - CENT);
  });
});

describe("discovery", () => {
  it("lists a route that declared the bazaar extension once a payment settled; each merchant sees its own", async () => {
    const merchant = await createMerchant({ name: "Listed Shop" });
    const stranger = await createMerchant({ name: "Unlisted Shop" });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(1_000_000n);
    const id = crypto.randomUUID();
    const v2Url = `https://api.listed.example/price/${id}`;
    const v1Url = `https://api.listed.example/v1/price/${id}`;
    const listed = async () => {
      const res = await api("GET", "/x402/facilitator/discovery/resources?limit=100");
      expect(res.status).toBe(200);
      expect(res.body.x402Version).toBe(2);
      return res.body.items as { resource: string }[];
    };
    const v2 = await v2Request(payer.key, terms, { value: CENT, resource: `${v2Url}?symbol=ETH`, extensions: BAZAAR });
    expect((await verify(merchant.apiKey, v2)).body.isValid).toBe(true);
    // Verified is not paid: nothing is listed yet.
    expect((await listed()).some((item) => item.resource === v2Url)).toBe(false);
    expect((await settle(merchant.apiKey, v2)).body.success).toBe(true);
    const v1 = await v1Request(payer.key, terms, {
      value: CENT,
      resource: v1Url,
      outputSchema: { input: { type: "http", method: "GET", discoverable: true }, output: { price: "number" } },
    });
    expect((await settle(merchant.apiKey, v1)).body.success).toBe(true);
    const unlisted = await v2Request(payer.key, terms, { value: CENT, resource: `${v2Url}/plain` });
    expect((await settle(merchant.apiKey, unlisted)).body.success).toBe(true);

    const items = await listed();
    expect(items.findIndex((item) => item.resource === v1Url)).toBeLessThan(
      items.findIndex((item) => item.resource === v2Url),
    );
    expect(items.find((item) => item.resource === v2Url)).toEqual({
      resource: v2Url,
      type: "http",
      x402Version: 2,
      accepts: [v2.paymentRequirements],
      lastUpdated: expect.any(String),
      description: "a paid call",
      mimeType: "application/json",
      extensions: BAZAAR,
    });
    expect(items.find((item) => item.resource === v1Url)).toMatchObject({ x402Version: 1, type: "http" });
    expect(items.some((item) => item.resource === `${v2Url}/plain`)).toBe(false);
    const page = await api("GET", "/x402/facilitator/discovery/resources?limit=1&offset=1");
    expect(page.body.items).toHaveLength(1);
    expect(page.body.pagination).toMatchObject({ limit: 1, offset: 1 });
    expect(page.body.pagination.total).toBeGreaterThanOrEqual(2);
    expect((await api("GET", "/x402/facilitator/discovery/resources?limit=0")).status).toBe(400);

    const own = await api("GET", "/merchant/x402/resources", { token: merchant.apiKey });
    expect(own.status).toBe(200);
    expect(own.body.resources.map((r: { resource: string }) => r.resource)).toEqual([v1Url, v2Url]);
    expect(own.body.resources[1]).toMatchObject({ x402Version: 2, listedAt: expect.any(String) });
    expect(own.body.resources[1].lastPaidAt >= own.body.resources[1].listedAt).toBe(true);
    const theirs = await api("GET", "/merchant/x402/resources", { token: stranger.apiKey });
    expect(theirs.body.resources).toEqual([]);
  });
});
