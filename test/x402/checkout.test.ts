import { env } from "cloudflare:workers";
import { type Hex, parseAbi, parseEventLogs } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { api, BASE } from "../helpers/api";
import { createCheckoutLink, createMerchant, merchantBalance } from "../helpers/factories";
import { chain, payToOf, publicClient, tokenBalance, xPaymentFor, xPaymentHeader } from "../helpers/x402";

/*
 * x402 on checkout links, on the real local chain. Payers: accounts 4 and 5,
 * used by no other test file, so their balance deltas are this file's alone.
 */
const PAYER_A = 4;
const PAYER_B = 5;
const UNITS_PER_CENT = 10_000n;
const TRANSFER_EVENT = parseAbi(["event Transfer(address indexed from, address indexed to, uint256 value)"]);

const addressOf = (index: number) => chain().accounts[index]!.address;
const decodeHeader = (value: string | null) => {
  expect(value, "header present").toBeTruthy();
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(value!), (c) => c.charCodeAt(0))));
};

async function linkCounters(merchantKey: string, token: string) {
  const res = await api("GET", "/merchant/checkout-links?limit=100", { token: merchantKey });
  expect(res.status).toBe(200);
  const link = res.body.links.find((l: { checkoutToken: string }) => l.checkoutToken === token);
  expect(link).toBeTruthy();
  return { paymentsCount: link.paymentsCount as number, totalPaidMinor: link.totalPaidMinor as number };
}

/** One Transfer of `value` from `from` to the link's receiving address `to`. */
async function expectTransferOnChain(transaction: Hex, from: Hex, value: bigint, to: Hex) {
  const receipt = await publicClient().getTransactionReceipt({ hash: transaction });
  expect(receipt.status).toBe("success");
  const transfers = parseEventLogs({ abi: TRANSFER_EVENT, eventName: "Transfer", logs: receipt.logs });
  expect(
    transfers.map((t) => ({ from: t.args.from.toLowerCase(), to: t.args.to.toLowerCase(), value: t.args.value })),
  ).toEqual([{ from: from.toLowerCase(), to: to.toLowerCase(), value }]);
}

describe("x402 on a checkout link", () => {
  let merchant: { merchantId: string; apiKey: string };
  beforeAll(async () => {
    merchant = await createMerchant({ name: "Checkout Shop" });
  });

  it("GET /checkout/:token/x402 without a payment: 402 with the same terms shape as a charge", async () => {
    const link = await createCheckoutLink(merchant.apiKey, 345, "a month of API access");
    const path = `/checkout/${link.checkoutToken}/x402`;
    const res = await api("GET", path, { headers: { Origin: "https://agent.example" } });
    expect(res.status).toBe(402);
    expect(res.body.x402Version).toBe(1);
    expect(typeof res.body.error).toBe("string");
    expect(res.body.accepts).toEqual([
      {
        scheme: "exact",
        network: "base-sepolia",
        maxAmountRequired: "3450000",
        resource: `${BASE}${path}`,
        description: "a month of API access",
        mimeType: expect.any(String),
        payTo: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
        maxTimeoutSeconds: expect.any(Number),
        asset: chain().token,
        extra: { name: "USD Coin", version: "2" },
      },
    ]);
    expect(Object.hasOwn(res.body.accepts[0], "outputSchema")).toBe(false);
    const v2 = decodeHeader(res.headers.get("PAYMENT-REQUIRED"));
    // The link's own receiving address, in both versions' terms: not the settlement address.
    const payTo = res.body.accepts[0].payTo as string;
    expect(payTo.toLowerCase()).not.toBe(chain().payTo.toLowerCase());
    expect(v2).toMatchObject({
      x402Version: 2,
      accepts: [{ scheme: "exact", network: "eip155:84532", amount: "3450000", payTo, asset: chain().token }],
    });
    expect(res.headers.get("Cache-Control") ?? "").toContain("no-store");
    expect(res.headers.get("Access-Control-Allow-Origin")).toBeTruthy();
    // Asking for terms creates no charge and moves no counter.
    const again = await api("GET", path);
    expect(again.body).toEqual(res.body);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({ paymentsCount: 0, totalPaidMinor: 0 });
    const charges = await env.DB.prepare("SELECT COUNT(*) AS n FROM charges WHERE checkout_link_id = ?")
      .bind(link.checkoutLinkId)
      .first<{ n: number }>();
    expect(charges?.n).toBe(0);
  });

  it("POST with X-PAYMENT settles a new charge against the link; GET with a payment settles another; the counters move", async () => {
    const cents = 345;
    const value = BigInt(cents) * UNITS_PER_CENT;
    const link = await createCheckoutLink(merchant.apiKey, cents, "checkout by x402");
    const path = `/checkout/${link.checkoutToken}/x402`;
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const payerBefore = await tokenBalance(addressOf(PAYER_A));

    const payTo = await payToOf(path);
    const first = await xPaymentHeader(PAYER_A, value, { to: payTo });
    const posted = await api("POST", path, { headers: { "X-PAYMENT": first.header } });
    expect(posted.status).toBe(200);
    expect(posted.body).toMatchObject({
      chargeId: expect.stringMatching(/^chg_/),
      status: "paid",
      settlement: { success: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/i) },
    });
    const tx1 = posted.body.settlement.transaction as Hex;
    const settlement = decodeHeader(posted.headers.get("X-PAYMENT-RESPONSE"));
    expect(settlement).toMatchObject({ success: true, transaction: tx1, network: "base-sepolia" });
    expect(String(settlement.payer).toLowerCase()).toBe(addressOf(PAYER_A).toLowerCase());
    await expectTransferOnChain(tx1, addressOf(PAYER_A), value, payTo);
    expect(await tokenBalance(addressOf(PAYER_A))).toBe(payerBefore - value);

    const charge1 = await api("GET", `/charges/${posted.body.chargeId}`);
    expect(charge1.status).toBe(200);
    expect(charge1.body).toMatchObject({
      merchantId: merchant.merchantId,
      amountMinor: cents,
      description: "checkout by x402",
      status: "paid",
      method: "x402",
      reference: tx1,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({
      paymentsCount: 1,
      totalPaidMinor: cents,
    });

    // Official clients retry with their first request's method: GET with a payment settles too.
    const second = await xPaymentHeader(PAYER_A, value, { urlSafe: true, to: payTo });
    const got = await api("GET", path, { headers: { "X-PAYMENT": second.header } });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ status: "paid", settlement: { success: true } });
    expect(got.body.chargeId).not.toBe(posted.body.chargeId);
    const tx2 = got.body.settlement.transaction as Hex;
    expect(tx2).not.toBe(tx1);
    await expectTransferOnChain(tx2, addressOf(PAYER_A), value, payTo);
    expect(await tokenBalance(addressOf(PAYER_A))).toBe(payerBefore - 2n * value);
    expect((await api("GET", `/charges/${got.body.chargeId}`)).body).toMatchObject({
      status: "paid",
      method: "x402",
      reference: tx2,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 2 * cents);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({
      paymentsCount: 2,
      totalPaidMinor: 2 * cents,
    });

    // The charges belong to the link and are listed for the merchant.
    const linked = await env.DB.prepare(
      "SELECT id, status, method FROM charges WHERE checkout_link_id = ? ORDER BY created_at",
    )
      .bind(link.checkoutLinkId)
      .all<{ id: string; status: string; method: string }>();
    expect(linked.results.map((r) => r.id).sort()).toEqual([posted.body.chargeId, got.body.chargeId].sort());
    expect(linked.results.every((r) => r.status === "paid" && r.method === "x402")).toBe(true);
    const listed = await api("GET", "/merchant/charges", { token: merchant.apiKey });
    const listedIds = listed.body.charges.map((c: { chargeId: string }) => c.chargeId);
    expect(listedIds).toContain(posted.body.chargeId);
    expect(listedIds).toContain(got.body.chargeId);

    // Resending a settled payment returns its own settlement: no new charge, no transfer, counters unchanged.
    const payerNow = await tokenBalance(addressOf(PAYER_A));
    const resent = await api("POST", path, { headers: { "X-PAYMENT": first.header } });
    expect(resent.status).toBe(200);
    expect(resent.body).toMatchObject({ chargeId: posted.body.chargeId, settlement: { transaction: tx1 } });
    expect(await tokenBalance(addressOf(PAYER_A))).toBe(payerNow);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({
      paymentsCount: 2,
      totalPaidMinor: 2 * cents,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 2 * cents);
  });

  it("two different payers paying one link at the same time each get their own paid charge", async () => {
    const cents = 212;
    const value = BigInt(cents) * UNITS_PER_CENT;
    const link = await createCheckoutLink(merchant.apiKey, cents, "shared link");
    const path = `/checkout/${link.checkoutToken}/x402`;
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const before = { a: await tokenBalance(addressOf(PAYER_A)), b: await tokenBalance(addressOf(PAYER_B)) };
    const payTo = await payToOf(path);
    const [a, b] = await Promise.all([
      xPaymentHeader(PAYER_A, value, { to: payTo }),
      xPaymentHeader(PAYER_B, value, { to: payTo }),
    ]);

    const [ra, rb] = await Promise.all([
      api("POST", path, { headers: { "X-PAYMENT": a.header } }),
      api("POST", path, { headers: { "X-PAYMENT": b.header } }),
    ]);
    expect(ra.status).toBe(200);
    expect(rb.status).toBe(200);
    expect(ra.body.chargeId).not.toBe(rb.body.chargeId);
    expect(decodeHeader(ra.headers.get("X-PAYMENT-RESPONSE")).payer.toLowerCase()).toBe(
      addressOf(PAYER_A).toLowerCase(),
    );
    expect(decodeHeader(rb.headers.get("X-PAYMENT-RESPONSE")).payer.toLowerCase()).toBe(
      addressOf(PAYER_B).toLowerCase(),
    );
    await expectTransferOnChain(ra.body.settlement.transaction, addressOf(PAYER_A), value, payTo);
    await expectTransferOnChain(rb.body.settlement.transaction, addressOf(PAYER_B), value, payTo);
    expect(await tokenBalance(addressOf(PAYER_A))).toBe(before.a - value);
    expect(await tokenBalance(addressOf(PAYER_B))).toBe(before.b - value);
    for (const r of [ra, rb]) {
      expect((await api("GET", `/charges/${r.body.chargeId}`)).body).toMatchObject({
        status: "paid",
        method: "x402",
        reference: r.body.settlement.transaction,
        amountMinor: cents,
      });
    }
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 2 * cents);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({
      paymentsCount: 2,
      totalPaidMinor: 2 * cents,
    });
  });

  it("a disabled link answers 409 to terms and to payments, and no tokens move", async () => {
    const cents = 150;
    const value = BigInt(cents) * UNITS_PER_CENT;
    const link = await createCheckoutLink(merchant.apiKey, cents, "soon disabled");
    const path = `/checkout/${link.checkoutToken}/x402`;
    // Signed while the link was active (its terms name its address), sent after it was disabled.
    const { header, payload } = await xPaymentFor(path, PAYER_B, value);
    const disabled = await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
      token: merchant.apiKey,
      body: { active: false },
    });
    expect(disabled.status).toBe(200);
    const payerBefore = await tokenBalance(addressOf(PAYER_B));

    expect((await api("GET", path)).status).toBe(409);
    expect((await api("POST", path, { headers: { "X-PAYMENT": header } })).status).toBe(409);
    expect((await api("GET", path, { headers: { "X-PAYMENT": header } })).status).toBe(409);
    expect(await tokenBalance(addressOf(PAYER_B))).toBe(payerBefore);
    const used = await publicClient().readContract({
      address: chain().token,
      abi: parseAbi(["function authorizationState(address, bytes32) view returns (bool)"]),
      functionName: "authorizationState",
      args: [addressOf(PAYER_B), payload.authorization.nonce],
    });
    expect(used).toBe(false);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({ paymentsCount: 0, totalPaidMinor: 0 });
    const charges = await env.DB.prepare("SELECT COUNT(*) AS n FROM charges WHERE checkout_link_id = ?")
      .bind(link.checkoutLinkId)
      .first<{ n: number }>();
    expect(charges?.n).toBe(0);

    // Enabled again, the same payment goes through.
    expect(
      (
        await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
          token: merchant.apiKey,
          body: { active: true },
        })
      ).status,
    ).toBe(200);
    const paid = await api("POST", path, { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    expect(await tokenBalance(addressOf(PAYER_B))).toBe(payerBefore - value);
    expect(await linkCounters(merchant.apiKey, link.checkoutToken)).toEqual({
      paymentsCount: 1,
      totalPaidMinor: cents,
    });
  });

  it("an unknown token answers 404, with or without a payment", async () => {
    const { header } = await xPaymentHeader(PAYER_B, 10_000n, { to: chain().payTo });
    expect((await api("GET", "/checkout/no-such-token/x402")).status).toBe(404);
    expect((await api("POST", "/checkout/no-such-token/x402", { headers: { "X-PAYMENT": header } })).status).toBe(404);
    expect((await api("GET", "/checkout/no-such-token/x402", { headers: { "X-PAYMENT": header } })).status).toBe(404);
  });
});
