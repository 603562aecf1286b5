import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { chargesOf, facilitatorTerms, settle, v1Request, v2Request } from "../helpers/facilitator";
import { createMerchant } from "../helpers/factories";
import { freshPayer, tokenBalance } from "../helpers/x402";

/*
 * Pay-per-call prices below a cent, settled through the service as a merchant's facilitator: the
 * charge and the merchant's balance are exact to the token's base unit.
 */

/** The merchant's balance in cents (the API's) and exactly, in base units (its row; the API adds it in section 16's work). */
const merchantMoney = async (key: string, merchantId: string) => {
  const res = await api("GET", "/merchant/me", { token: key });
  expect(res.status).toBe(200);
  const row = await env.DB.prepare("SELECT balance_base_units AS baseUnits FROM merchants WHERE id = ?")
    .bind(merchantId)
    .first<{ baseUnits: number }>();
  return { minor: res.body.merchant.balanceMinor as number, baseUnits: BigInt(row!.baseUnits) };
};

describe("amounts below a cent", () => {
  it("a $0.001 payment is a charge of exactly 1000 base units and credits exactly that", async () => {
    const merchant = await createMerchant({ name: "Tenth Of A Cent Shop" });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(1_000_000n);
    const before = await merchantMoney(merchant.apiKey, merchant.merchantId);
    const body = await v2Request(payer.key, terms, { value: 1000n, resource: "https://api.tiny.example/call" });
    const settled = await settle(merchant.apiKey, body);
    expect(settled.body, settled.text).toMatchObject({ success: true });
    const [charge] = await chargesOf(merchant.apiKey);
    expect(charge).toMatchObject({ amountBaseUnits: "1000", amountMinor: null, method: "x402", status: "paid" });
    expect(await merchantMoney(merchant.apiKey, merchant.merchantId)).toEqual({
      minor: before.minor,
      baseUnits: before.baseUnits + 1000n,
    });
    expect(await tokenBalance(payer.address)).toBe(1_000_000n - 1000n);
  });

  it("ten of them, in both versions, make exactly one cent", async () => {
    const merchant = await createMerchant({ name: "Ten Calls Shop" });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(1_000_000n);
    for (let i = 0; i < 10; i++) {
      const build = i % 2 === 0 ? v2Request : v1Request;
      const body = await build(payer.key, terms, { value: 1000n, resource: `https://api.tiny.example/call/${i}` });
      expect((await settle(merchant.apiKey, body)).body.success).toBe(true);
    }
    expect(await merchantMoney(merchant.apiKey, merchant.merchantId)).toEqual({ minor: 1, baseUnits: 10_000n });
    expect((await chargesOf(merchant.apiKey)).every((c) => c.amountBaseUnits === "1000")).toBe(true);
  });
});
