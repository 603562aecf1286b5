import { exports } from "cloudflare:workers";
import { HTTPFacilitatorClient } from "@x402/core/http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useFacilitator } from "x402/verify";
import { BASE } from "../helpers/api";
import { type FacilitatorTerms, facilitatorTerms, v1Request, v2Request } from "../helpers/facilitator";
import { createMerchant, merchantBalance } from "../helpers/factories";
import { chain, freshPayer } from "../helpers/x402";

/*
 * The official facilitator clients themselves against the routes: `@x402/core`'s
 * HTTPFacilitatorClient (version 2) and `x402`'s useFacilitator (version 1), unchanged, with the
 * merchant key through their auth-header option. Their fetch reaches the Worker's own handler.
 */

const CENT = 10_000n;
const realFetch = globalThis.fetch;

describe("the official facilitator clients", () => {
  let merchant: { merchantId: string; apiKey: string };
  let terms: FacilitatorTerms;
  beforeAll(async () => {
    globalThis.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init);
      return request.url.startsWith(BASE) ? exports.default.fetch(request) : realFetch(request);
    };
    merchant = await createMerchant({ name: "Official Clients Shop" });
    terms = await facilitatorTerms(merchant.apiKey);
  });
  afterAll(() => {
    globalThis.fetch = realFetch;
  });
  const auth = () => {
    const headers = { Authorization: `Bearer ${merchant.apiKey}` };
    return { verify: headers, settle: headers, supported: headers };
  };

  it("version 2: getSupported, verify and settle parse, and the merchant is paid", async () => {
    const client = new HTTPFacilitatorClient({ url: terms.facilitatorUrl, createAuthHeaders: async () => auth() });
    const supported = await client.getSupported();
    expect(supported.kinds).toContainEqual({ x402Version: 2, scheme: "exact", network: `eip155:${chain().chainId}` });
    const payer = await freshPayer(1_000_000n);
    const { paymentPayload, paymentRequirements } = await v2Request(payer.key, terms, {
      value: 4n * CENT,
      resource: "https://api.clients.example/v2",
    });
    const before = await merchantBalance(merchant.apiKey);
    const verified = await client.verify(paymentPayload as any, paymentRequirements as any);
    expect(verified).toMatchObject({ isValid: true, payer: payer.address });
    const settled = await client.settle(paymentPayload as any, paymentRequirements as any);
    expect(settled).toMatchObject({ success: true, network: `eip155:${chain().chainId}`, payer: payer.address });
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await merchantBalance(merchant.apiKey)).toBe(before + 4);
    // A refusal is an answer the client reads, not an error it throws.
    const again = await client.verify(paymentPayload as any, paymentRequirements as any);
    expect(again).toMatchObject({ isValid: false, invalidReason: "invalid_exact_evm_nonce_already_used" });
  });

  it("version 1: verify and settle parse, and the merchant is paid", async () => {
    const client = useFacilitator({
      url: terms.facilitatorUrl as `${string}://${string}`,
      createAuthHeaders: async () => auth(),
    });
    const payer = await freshPayer(1_000_000n);
    const { paymentPayload, paymentRequirements } = await v1Request(payer.key, terms, {
      value: 6n * CENT,
      resource: "https://api.clients.example/v1",
    });
    const before = await merchantBalance(merchant.apiKey);
    const verified = await client.verify(paymentPayload as any, paymentRequirements as any);
    expect(verified).toEqual({ isValid: true, payer: payer.address });
    const settled = await client.settle(paymentPayload as any, paymentRequirements as any);
    expect(settled).toMatchObject({ success: true, network: "base-sepolia", payer: payer.address });
    expect(await merchantBalance(merchant.apiKey)).toBe(before + 6);
    const listed = await client.list({ limit: 5 });
    expect(listed.pagination.limit).toBe(5);
  });
});
