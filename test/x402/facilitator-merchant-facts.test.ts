import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { chargesOf, facilitatorTerms, settle, v2Request, verify } from "../helpers/facilitator";
import { createMerchant } from "../helpers/factories";
import { freshPayer } from "../helpers/x402";

/*
 * What a facilitated payment reads of its merchant (its name, its receiving address) each isolate
 * keeps once the merchant has both, as they never change: a merchant without its address yet is
 * never remembered as one, and every payment still names the merchant in its `charge.created`.
 */

const createdEventOf = async (chargeId: string) => {
  const row = await env.DB.prepare(
    "SELECT data FROM outbox_events WHERE type = 'charge.created' AND json_extract(data, '$.chargeId') = ?",
  )
    .bind(chargeId)
    .first<{ data: string }>();
  return row ? JSON.parse(row.data) : null;
};

describe("the merchant's facts a facilitated payment reads", () => {
  it("a merchant with no payTo yet is refused, then paid as soon as its terms assign one", async () => {
    const merchant = await createMerchant({ name: "Late Terms Shop" });
    const other = await createMerchant({ name: "Early Terms Shop" });
    const otherTerms = await facilitatorTerms(other.apiKey);
    const payer = await freshPayer(1_000_000n);
    const resource = "https://api.late.example/call";

    // Before its first ask the merchant has no address: a payment to any address is not its own.
    const early = await v2Request(payer.key, otherTerms, { value: 1000n, resource });
    expect((await verify(merchant.apiKey, early)).body).toMatchObject({
      isValid: false,
      invalidReason: "invalid_exact_evm_recipient_mismatch",
    });
    expect((await settle(merchant.apiKey, early)).body).toMatchObject({
      success: false,
      errorReason: "invalid_exact_evm_recipient_mismatch",
    });
    expect(await chargesOf(merchant.apiKey)).toEqual([]);

    // Assigned now: the very next payment to it is taken, not refused by what was read before.
    const terms = await facilitatorTerms(merchant.apiKey);
    const paid = await v2Request(payer.key, terms, { value: 1000n, resource });
    expect((await verify(merchant.apiKey, paid)).body).toEqual({ isValid: true, payer: payer.address });
    expect((await settle(merchant.apiKey, paid)).body).toMatchObject({ success: true });
    // And another merchant's address stays refused once this one's is known.
    const theirs = await v2Request(payer.key, otherTerms, { value: 1000n, resource });
    expect((await settle(merchant.apiKey, theirs)).body).toMatchObject({
      success: false,
      errorReason: "invalid_exact_evm_recipient_mismatch",
    });
    expect(await chargesOf(merchant.apiKey)).toHaveLength(1);
  });

  it("every payment's new charge names its merchant in charge.created, the first and the ones after", async () => {
    const merchant = await createMerchant({ name: "Named Routes Shop" });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(1_000_000n);
    for (let i = 0; i < 3; i++) {
      const body = await v2Request(payer.key, terms, { value: 1000n, resource: `https://api.named.example/${i}` });
      expect((await settle(merchant.apiKey, body)).body).toMatchObject({ success: true });
    }
    const charges = await chargesOf(merchant.apiKey);
    expect(charges).toHaveLength(3);
    for (const charge of charges)
      expect(await createdEventOf(String(charge.chargeId))).toMatchObject({
        chargeId: charge.chargeId,
        merchantId: merchant.merchantId,
        merchantName: "Named Routes Shop",
      });
  });
});
