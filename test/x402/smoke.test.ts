import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { chain, tokenBalance, xPaymentHeader } from "../helpers/x402";
import type { Hex } from "viem";

describe("x402 smoke", () => {
  it("the local chain's settlement address starts with a float of at least 100,000 test tokens", async () => {
    // No payout has moved any yet in the tests; payouts of ledger-funded balances leave from here.
    expect(await tokenBalance(chain().payTo)).toBeGreaterThanOrEqual(100_000_000_000n);
  });

  it("402 terms, then a signed payment settles on the local chain", async () => {
    const merchant = await createMerchant();
    const charge = await createCharge(merchant.apiKey, 250);
    const terms = await api("GET", `/charges/${charge.chargeId}/x402`);
    expect(terms.status).toBe(402);
    expect(terms.body.accepts[0]).toMatchObject({
      scheme: "exact",
      network: "base-sepolia",
      maxAmountRequired: "2500000",
      asset: chain().token,
    });
    // The charge's own receiving address, not the settlement address: what the payer signs names what it pays.
    const payTo = terms.body.accepts[0].payTo as Hex;
    expect(payTo.toLowerCase()).not.toBe(chain().payTo.toLowerCase());
    const before = await tokenBalance(payTo);
    const { header } = await xPaymentHeader(1, 2_500_000n, { to: payTo });
    const paid = await api("GET", `/charges/${charge.chargeId}/x402`, { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    expect(paid.body.settlement.success).toBe(true);
    expect(await tokenBalance(payTo)).toBe(before + 2_500_000n);
    expect(await merchantBalance(merchant.apiKey)).toBe(250);
    const read = await api("GET", `/charges/${charge.chargeId}`);
    expect(read.body).toMatchObject({ status: "paid", method: "x402", reference: paid.body.settlement.transaction });
  });
});
