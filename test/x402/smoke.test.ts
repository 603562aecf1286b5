import { erc20Abi, type Hex, zeroAddress } from "viem";
import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { chain, publicClient, tokenBalance, xPaymentHeader } from "../helpers/x402";

describe("x402 smoke", () => {
  it("the local chain minted the settlement address a float of 100,000 test tokens", async () => {
    // Its balance moves with other files' payouts and sweeps: the mint itself is what the chain set up.
    const mints = await publicClient().getContractEvents({
      address: chain().token,
      abi: erc20Abi,
      eventName: "Transfer",
      args: { from: zeroAddress, to: chain().payTo },
      fromBlock: 0n,
    });
    expect(mints.map((m) => m.args.value)).toEqual([100_000_000_000n]);
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
