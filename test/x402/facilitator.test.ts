import type { Hex } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { api, BASE } from "../helpers/api";
import {
  chargesOf,
  type FacilitatorTerms,
  facilitatorTerms,
  settle,
  v1Request,
  v2Request,
  verify,
} from "../helpers/facilitator";
import { createAgent, createMerchant, merchantBalance } from "../helpers/factories";
import { chain, freshPayer, publicClient, TOKEN_ABI, tokenBalance } from "../helpers/x402";

/*
 * The service as the x402 facilitator of a merchant's own routes, on the real local chain: the
 * requests are the official facilitator clients' (version 1 and 2), paid by fresh payers whose
 * balances no other file touches.
 */

const CENT = 10_000n;
const used = (payer: Hex, nonce: Hex) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [payer, nonce],
  });

describe("the service as a merchant's x402 facilitator", () => {
  let merchant: { merchantId: string; apiKey: string };
  let other: { merchantId: string; apiKey: string };
  let terms: FacilitatorTerms;
  let otherTerms: FacilitatorTerms;
  beforeAll(async () => {
    merchant = await createMerchant({ name: "Own Routes Shop" });
    other = await createMerchant({ name: "Other Routes Shop" });
    terms = await facilitatorTerms(merchant.apiKey);
    otherTerms = await facilitatorTerms(other.apiKey);
  });

  it("answers the terms a middleware needs: the merchant's own payTo, the same on every ask", async () => {
    expect(terms).toEqual({
      facilitatorUrl: `${BASE}/x402/facilitator`,
      payTo: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      network: `eip155:${chain().chainId}`,
      asset: chain().token,
      extra: { name: "USD Coin", version: "2" },
    });
    expect((await facilitatorTerms(merchant.apiKey)).payTo).toBe(terms.payTo);
    expect(otherTerms.payTo).not.toBe(terms.payTo);
    expect(terms.payTo.toLowerCase()).not.toBe(chain().payTo.toLowerCase());
  });

  it("answers supported: exact in both versions on the service's chain, and the bazaar extension", async () => {
    const res = await api("GET", "/x402/facilitator/supported", { token: merchant.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.kinds).toEqual([
      { x402Version: 1, scheme: "exact", network: "base-sepolia" },
      { x402Version: 2, scheme: "exact", network: `eip155:${chain().chainId}` },
    ]);
    expect(res.body.extensions).toEqual(["bazaar"]);
    expect(Object.keys(res.body.signers)).toEqual(["eip155:*"]);
  });

  it("version 1: verify changes nothing, settle pays the merchant a new paid charge for the URL", async () => {
    const payer = await freshPayer(1_000_000n);
    const resource = `https://api.shop.example/v1/report/${crypto.randomUUID()}`;
    const body = await v1Request(payer.key, terms, { value: 25n * CENT, resource, description: "one v1 report" });
    const before = {
      balance: await merchantBalance(merchant.apiKey),
      charges: (await chargesOf(merchant.apiKey)).length,
    };
    const payTo = await tokenBalance(terms.payTo);

    const verified = await verify(merchant.apiKey, body);
    expect(verified.status).toBe(200);
    expect(verified.body).toEqual({ isValid: true, payer: payer.address });
    expect(await merchantBalance(merchant.apiKey)).toBe(before.balance);
    expect((await chargesOf(merchant.apiKey)).length).toBe(before.charges);

    const settled = await settle(merchant.apiKey, body);
    expect(settled.status).toBe(200);
    expect(settled.body).toEqual({
      success: true,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      network: "base-sepolia",
      payer: payer.address,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(before.balance + 25);
    expect(await tokenBalance(terms.payTo)).toBe(payTo + 25n * CENT);
    expect(await tokenBalance(payer.address)).toBe(1_000_000n - 25n * CENT);
    const [charge] = await chargesOf(merchant.apiKey);
    expect(charge).toMatchObject({
      merchantId: merchant.merchantId,
      amountMinor: 25,
      status: "paid",
      method: "x402",
      reference: settled.body.transaction,
      description: "one v1 report",
      resource,
    });
    const receipt = await api("GET", `/charges/${charge!.chargeId}/receipt`);
    expect(receipt.status, receipt.text).toBe(200);
  });

  it("version 2: settle pays the merchant, the description and resource from the payload", async () => {
    const payer = await freshPayer(1_000_000n);
    const resource = `https://api.shop.example/v2/report/${crypto.randomUUID()}`;
    const body = await v2Request(payer.key, terms, { value: 7n * CENT, resource, description: "one v2 report" });
    const before = await merchantBalance(merchant.apiKey);
    expect((await verify(merchant.apiKey, body)).body).toEqual({ isValid: true, payer: payer.address });
    const settled = await settle(merchant.apiKey, body);
    expect(settled.body).toEqual({
      success: true,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      network: `eip155:${chain().chainId}`,
      payer: payer.address,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(before + 7);
    const [charge] = await chargesOf(merchant.apiKey);
    expect(charge).toMatchObject({ amountMinor: 7, method: "x402", reference: settled.body.transaction, resource });
    expect(charge!.description).toBe("one v2 report");
  });

  it("another merchant's payTo is refused in verify and settle, in each version's words, and nothing moves", async () => {
    const payer = await freshPayer(1_000_000n);
    const resource = "https://api.shop.example/theirs";
    const v2 = await v2Request(payer.key, terms, { value: CENT, resource, payTo: otherTerms.payTo });
    const v1 = await v1Request(payer.key, terms, { value: CENT, resource, payTo: otherTerms.payTo });
    const before = await merchantBalance(merchant.apiKey);
    for (const [body, reason] of [
      [v2, "invalid_exact_evm_recipient_mismatch"],
      [v1, "invalid_exact_evm_payload_recipient_mismatch"],
    ] as const) {
      const verified = await verify(merchant.apiKey, body);
      expect(verified.status).toBe(200);
      expect(verified.body).toEqual({ isValid: false, invalidReason: reason, payer: payer.address });
      const settled = await settle(merchant.apiKey, body);
      expect(settled.status).toBe(200);
      expect(settled.body).toMatchObject({ success: false, errorReason: reason, transaction: "" });
      expect(await used(payer.address, body.paymentPayload.payload.authorization.nonce as Hex)).toBe(false);
    }
    // An authorization signed to the other merchant under requirements naming this one's address: its `to` decides.
    const signedToOther = await v2Request(payer.key, terms, {
      value: CENT,
      resource,
      authorization: { to: otherTerms.payTo },
    });
    expect((await settle(merchant.apiKey, signedToOther)).body.errorReason).toBe(
      "invalid_exact_evm_recipient_mismatch",
    );
    expect(await merchantBalance(merchant.apiKey)).toBe(before);
    expect(await merchantBalance(other.apiKey)).toBe(0);
    expect(await tokenBalance(payer.address)).toBe(1_000_000n);
  });

  it("a forged signature, an expired authorization and an underfunded payer are never settled", async () => {
    const payer = await freshPayer(1_000_000n);
    const broke = await freshPayer(0n);
    const resource = "https://api.shop.example/refused";
    const now = BigInt(Math.floor(Date.now() / 1000));
    const forger = (await freshPayer(0n)).key;
    const cases = [
      [
        await v2Request(payer.key, terms, { value: CENT, resource, authorization: { signerKey: forger } }),
        "invalid_exact_evm_signature",
      ],
      [
        await v1Request(payer.key, terms, { value: CENT, resource, authorization: { signerKey: forger } }),
        "invalid_exact_evm_payload_signature",
      ],
      [
        await v2Request(payer.key, terms, { value: CENT, resource, authorization: { validBefore: now - 5n } }),
        "invalid_exact_evm_payload_authorization_valid_before",
      ],
      [await v2Request(broke.key, terms, { value: CENT, resource }), "invalid_exact_evm_insufficient_balance"],
      [await v1Request(broke.key, terms, { value: CENT, resource }), "insufficient_funds"],
    ] as const;
    const before = {
      balance: await merchantBalance(merchant.apiKey),
      charges: (await chargesOf(merchant.apiKey)).length,
    };
    for (const [body, reason] of cases) {
      const verified = await verify(merchant.apiKey, body);
      expect(verified.body, reason).toMatchObject({ isValid: false, invalidReason: reason });
      const settled = await settle(merchant.apiKey, body);
      expect(settled.status).toBe(200);
      expect(settled.body, reason).toMatchObject({ success: false, errorReason: reason, transaction: "" });
      const a = body.paymentPayload.payload.authorization;
      expect(await used(a.from as Hex, a.nonce as Hex)).toBe(false);
    }
    expect(await merchantBalance(merchant.apiKey)).toBe(before.balance);
    expect((await chargesOf(merchant.apiKey)).length).toBe(before.charges);
    expect(await tokenBalance(payer.address)).toBe(1_000_000n);
  });

  it("malformed bodies are 400, never a 5xx", async () => {
    const payer = await freshPayer(0n);
    const good = await v2Request(payer.key, terms, { value: CENT, resource: "https://api.shop.example/x" });
    const bodies: unknown[] = [
      {},
      { x402Version: 3, paymentPayload: good.paymentPayload, paymentRequirements: good.paymentRequirements },
      { x402Version: 2, paymentPayload: good.paymentPayload },
      { ...good, paymentRequirements: { ...good.paymentRequirements, amount: "-1" } },
      { ...good, paymentPayload: { ...good.paymentPayload, payload: { signature: "0x12" } } },
      { ...good, x402Version: 1 },
      [],
      "settle",
    ];
    for (const body of bodies) {
      for (const call of [verify, settle]) {
        const res = await call(merchant.apiKey, body);
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error).toBe("invalid_request");
      }
    }
    const notJson = await api("POST", "/x402/facilitator/settle", {
      token: merchant.apiKey,
      body: "{not json",
      headers: { "content-type": "application/json" },
    });
    expect(notJson.status).toBe(400);
  });

  it("asks for the merchant key: none is 401 naming it, an agent's is 403", async () => {
    const agent = await createAgent({ name: "not-a-merchant" });
    const payer = await freshPayer(0n);
    const body = await v2Request(payer.key, terms, { value: CENT, resource: "https://api.shop.example/x" });
    const calls = [
      ["GET", "/merchant/x402/facilitator"],
      ["GET", "/merchant/x402/resources"],
      ["GET", "/x402/facilitator/supported"],
      ["POST", "/x402/facilitator/verify"],
      ["POST", "/x402/facilitator/settle"],
    ] as const;
    for (const [method, path] of calls) {
      const payload = method === "POST" ? { body } : {};
      const anonymous = await api(method, path, payload);
      expect(anonymous.status, path).toBe(401);
      expect(anonymous.body.error).toBe("merchant_api_key_required");
      const asAgent = await api(method, path, { ...payload, token: agent.apiKey });
      expect(asAgent.status, path).toBe(403);
      expect(asAgent.body.error).toBe("credential_not_allowed");
    }
  });
});
