import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { FacilitatorRequest } from "../../src/x402/facilitator-protocol";
import { settleForMerchant } from "../../src/x402/facilitator-service";
import { api } from "../helpers/api";
import { chargesOf, facilitatorTerms, settle, v2Request } from "../helpers/facilitator";
import { balanceOf, createAgent, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { cleanUp, settleReply, withRemoteFacilitator, x } from "../helpers/settle-outcomes";
import { freshPayer, tokenBalance, xPaymentHeader } from "../helpers/x402";

/*
 * A charge a merchant's facilitated settlement made exists for that one payment only: once its
 * settlement failed, nobody else pays it, neither a wallet nor another x402 payment, and the same
 * payload asked again settles that same charge or answers the failure, exactly once.
 */

afterEach(cleanUp);

const CENT = 10_000n;

/** A merchant's route paid through a facilitator whose settlement fails with the authorization unused. */
async function failedSettlement(cents: bigint) {
  const merchant = await createMerchant({ name: "Failed Settlement Shop" });
  const terms = await facilitatorTerms(merchant.apiKey);
  const payer = await freshPayer(1_000_000n);
  const body = await v2Request(payer.key, terms, { value: cents * CENT, resource: "https://api.failed.example/call" });
  const request = FacilitatorRequest.parse(body);
  const who = merchant.merchantId;
  const failing = withRemoteFacilitator(async () => settleReply("insufficient_funds"));
  const answer = await settleForMerchant(env, x(), who, request, failing);
  expect(answer).toMatchObject({
    success: false,
    errorReason: "invalid_exact_evm_insufficient_balance",
    transaction: "",
  });
  const charges = await chargesOf(merchant.apiKey);
  expect(charges.length).toBe(1);
  expect(charges[0]).toMatchObject({ status: "pending", method: null, amountBaseUnits: String(cents * CENT) });
  return { merchant, terms, payer, body, request, who, chargeId: charges[0]!.chargeId as string };
}

describe("a facilitated charge whose settlement failed", () => {
  it("is refused to a wallet and to x402 on its charge URL (409 charge_not_pending), and nothing moves", async () => {
    const f = await failedSettlement(2n);
    const agent = await createAgent({ credit: 500 });
    const byWallet = await payCharge(agent.apiKey, f.chargeId);
    expect(byWallet.status, byWallet.text).toBe(409);
    expect(byWallet.body).toEqual({ error: "charge_not_pending" });
    expect(await balanceOf(agent.apiKey)).toBe(500);

    // No terms are offered for it, and a payment sent anyway is refused before anything is reserved.
    const terms = await api("GET", `/charges/${f.chargeId}/x402`);
    expect(terms.status, terms.text).toBe(409);
    expect(terms.body).toEqual({ error: "charge_not_pending" });
    const other = await freshPayer(1_000_000n);
    const header = (await xPaymentHeader(other.key, 2n * CENT, { to: f.terms.payTo })).header;
    const byX402 = await api("GET", `/charges/${f.chargeId}/x402`, { headers: { "X-PAYMENT": header } });
    expect(byX402.status, byX402.text).toBe(409);
    expect(byX402.body).toEqual({ error: "charge_not_pending" });
    expect(await tokenBalance(other.address)).toBe(1_000_000n);
    const payments = await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE payer = ?")
      .bind(other.address.toLowerCase())
      .first<{ n: number }>();
    expect(payments?.n).toBe(0);

    expect(await merchantBalance(f.merchant.apiKey)).toBe(0);
    const [listed] = await chargesOf(f.merchant.apiKey);
    expect(listed).toMatchObject({ chargeId: f.chargeId, status: "pending", paidAt: null, reference: null });
    expect(await tokenBalance(f.payer.address)).toBe(1_000_000n);
  });

  it("the same payload asked again: failing again answers the failure; settling takes up that same charge, once", async () => {
    const f = await failedSettlement(3n);
    const failing = withRemoteFacilitator(async () => settleReply("insufficient_funds"));
    expect(await settleForMerchant(env, x(), f.who, f.request, failing)).toMatchObject({
      success: false,
      errorReason: "invalid_exact_evm_insufficient_balance",
    });
    cleanUp();
    // The service's own settler: the authorization was never used, so it settles now, into the same charge.
    const [first, second] = await Promise.all([settle(f.merchant.apiKey, f.body), settle(f.merchant.apiKey, f.body)]);
    expect(first.body, first.text).toMatchObject({ success: true });
    expect(second.body).toEqual(first.body);
    const charges = await chargesOf(f.merchant.apiKey);
    expect(charges.length).toBe(1);
    expect(charges[0]).toMatchObject({
      chargeId: f.chargeId,
      status: "paid",
      method: "x402",
      reference: first.body.transaction,
    });
    expect(await merchantBalance(f.merchant.apiKey)).toBe(3);
    expect(await tokenBalance(f.payer.address)).toBe(1_000_000n - 3n * CENT);
    expect((await settle(f.merchant.apiKey, f.body)).body).toEqual(first.body);
    expect(await merchantBalance(f.merchant.apiKey)).toBe(3);
  });
});
