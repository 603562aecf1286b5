import { env } from "cloudflare:workers";
import { type Hex, parseAbi, parseEventLogs } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { api, BASE, consoleToken } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import {
  chain,
  payToOf,
  publicClient,
  signAuthorization,
  TOKEN_ABI,
  tokenBalance,
  xPaymentFor,
  xPaymentHeader,
} from "../helpers/x402";

/*
 * x402 on a charge, against the real local chain with the built-in facilitator.
 * Payer: account 3 only (the other x402 files use other accounts), so its
 * balance deltas are this file's alone. Each charge is paid to its own receiving
 * address, so what reaches it is exact.
 */
const PAYER = 3;
const UNITS_PER_CENT = 10_000n;
const TRANSFER_EVENT = parseAbi(["event Transfer(address indexed from, address indexed to, uint256 value)"]);

const payer = () => chain().accounts[PAYER]!.address;
const decodeHeader = (value: string | null) => {
  expect(value, "header present").toBeTruthy();
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(value!), (c) => c.charCodeAt(0))));
};
const toBase64 = (text: string) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
const x402Path = (chargeId: string) => `/charges/${chargeId}/x402`;
const getCharge = async (chargeId: string) => (await api("GET", `/charges/${chargeId}`)).body;

/** The receipt of a settlement: succeeded, with exactly one Transfer of `value` from the payer to the charge's address `to`. */
async function expectTransferOnChain(transaction: Hex, from: Hex, value: bigint, to: Hex) {
  const receipt = await publicClient().getTransactionReceipt({ hash: transaction });
  expect(receipt.status).toBe("success");
  expect(receipt.to?.toLowerCase()).toBe(chain().token.toLowerCase());
  const transfers = parseEventLogs({ abi: TRANSFER_EVENT, eventName: "Transfer", logs: receipt.logs });
  expect(transfers).toHaveLength(1);
  expect(transfers[0]!.args.from.toLowerCase()).toBe(from.toLowerCase());
  expect(transfers[0]!.args.to.toLowerCase()).toBe(to.toLowerCase());
  expect(transfers[0]!.args.value).toBe(value);
  return receipt;
}

async function auditVerify() {
  const res = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(res.status).toBe(200);
  return res.body as { ok: boolean; rows: number };
}

describe("GET /charges/:id/x402 terms (402)", () => {
  let merchant: { merchantId: string; apiKey: string };
  beforeAll(async () => {
    merchant = await createMerchant({ name: "Terms Shop" });
  });

  it("answers 402 with strict v1 terms in the body and v2 terms in PAYMENT-REQUIRED, not cached, with CORS", async () => {
    const charge = await createCharge(merchant.apiKey, 250, { description: "one weather report" });
    const res = await api("GET", x402Path(charge.chargeId), { headers: { Origin: "https://agent.example" } });
    expect(res.status).toBe(402);
    expect(res.body.x402Version).toBe(1);
    expect(typeof res.body.error).toBe("string");
    expect(res.body.error.length).toBeGreaterThan(0);
    expect(res.body.accepts).toHaveLength(1);
    const entry = res.body.accepts[0];
    expect(entry).toEqual({
      scheme: "exact",
      network: "base-sepolia",
      maxAmountRequired: "2500000",
      resource: `${BASE}${x402Path(charge.chargeId)}`,
      description: "one weather report",
      mimeType: expect.any(String),
      payTo: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      maxTimeoutSeconds: expect.any(Number),
      asset: chain().token,
      extra: { name: "USD Coin", version: "2" },
    });
    expect(Object.hasOwn(entry, "outputSchema")).toBe(false);
    expect(entry.maxTimeoutSeconds).toBeGreaterThan(0);
    expect(Number.isInteger(entry.maxTimeoutSeconds)).toBe(true);
    expect(entry.payTo).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(() => new URL(entry.resource)).not.toThrow();

    const v2 = decodeHeader(res.headers.get("PAYMENT-REQUIRED"));
    expect(v2.x402Version).toBe(2);
    expect(v2.accepts).toHaveLength(1);
    expect(v2.accepts[0]).toMatchObject({
      scheme: "exact",
      network: "eip155:84532",
      amount: "2500000",
      asset: chain().token,
      payTo: entry.payTo,
      maxTimeoutSeconds: entry.maxTimeoutSeconds,
      extra: { name: "USD Coin", version: "2" },
    });
    expect(v2.resource?.url).toBe(entry.resource);

    expect(res.headers.get("Cache-Control") ?? "").toContain("no-store");
    expect(res.headers.get("Access-Control-Allow-Origin")).toBeTruthy();
    const exposed = (res.headers.get("Access-Control-Expose-Headers") ?? "").toLowerCase();
    expect(exposed).toContain("payment-response");
    expect(exposed).toContain("payment-required");
  });

  it("the amount in base units is cents x 10,000 as a decimal string", async () => {
    for (const cents of [1, 99, 12_345]) {
      const charge = await createCharge(merchant.apiKey, cents);
      const res = await api("GET", x402Path(charge.chargeId));
      expect(res.status).toBe(402);
      expect(res.body.accepts[0].maxAmountRequired).toBe((BigInt(cents) * UNITS_PER_CENT).toString());
      expect(decodeHeader(res.headers.get("PAYMENT-REQUIRED")).accepts[0].amount).toBe(
        (BigInt(cents) * UNITS_PER_CENT).toString(),
      );
    }
  });

  it("terms are identical between two calls", async () => {
    const charge = await createCharge(merchant.apiKey, 777, { description: "deterministic" });
    const a = await api("GET", x402Path(charge.chargeId));
    const b = await api("GET", x402Path(charge.chargeId));
    expect(a.status).toBe(402);
    expect(b.status).toBe(402);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get("PAYMENT-REQUIRED")).toBe(a.headers.get("PAYMENT-REQUIRED"));
  });

  it("unknown charge: 404", async () => {
    const res = await api("GET", x402Path("chg_doesnotexist000000"));
    expect(res.status).toBe(404);
    expect(res.body.error).toBeTruthy();
    const withPayment = await api("GET", x402Path("chg_doesnotexist000000"), {
      headers: { "X-PAYMENT": (await xPaymentHeader(PAYER, 10_000n, { to: chain().payTo })).header },
    });
    expect(withPayment.status).toBe(404);
  });

  it("CORS preflight allows the payment headers and exposes the response headers", async () => {
    const charge = await createCharge(merchant.apiKey, 100);
    const res = await api("OPTIONS", x402Path(charge.chargeId), {
      headers: {
        Origin: "https://agent.example",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "x-payment,payment-signature,access-control-expose-headers",
      },
    });
    expect(res.status).toBeLessThan(300);
    expect(res.headers.get("Access-Control-Allow-Origin")).toBeTruthy();
    const allowed = (res.headers.get("Access-Control-Allow-Headers") ?? "")
      .toLowerCase()
      .split(",")
      .map((h) => h.trim());
    expect(allowed).toContain("x-payment");
    expect(allowed).toContain("payment-signature");
    expect((res.headers.get("Access-Control-Allow-Methods") ?? "").toUpperCase()).toContain("GET");
    const exposed = (res.headers.get("Access-Control-Expose-Headers") ?? "")
      .toLowerCase()
      .split(",")
      .map((h) => h.trim());
    expect(exposed).toContain("payment-response");
    expect(exposed).toContain("x-payment-response");
  });
});

describe("paying a charge with x402", () => {
  let merchant: { merchantId: string; apiKey: string };
  const hook = `ok-x402-charge-${crypto.randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    merchant = await createMerchant({ name: "Paid Shop" });
    await registerEndpoint(hook, { merchantId: merchant.merchantId, events: ["charge.succeeded"] });
  });

  it("parallel settlements each see their own receipt and answer 200", async () => {
    const charges = await Promise.all(
      Array.from({ length: 6 }, (_, i) => createCharge(merchant.apiKey, 11 + i, { description: `parallel ${i}` })),
    );
    const headers = await Promise.all(
      charges.map((charge, i) => xPaymentFor(x402Path(charge.chargeId), PAYER, BigInt(11 + i) * UNITS_PER_CENT)),
    );
    const responses = await Promise.all(
      charges.map((charge, i) =>
        api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": headers[i]!.header } }),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    for (const [i, res] of responses.entries())
      expect(res.body).toMatchObject({ chargeId: charges[i]!.chargeId, status: "paid", settlement: { success: true } });
    expect(new Set(responses.map((r) => r.body.settlement.transaction)).size).toBe(6);
  });

  it("X-PAYMENT (standard base64) settles on chain, marks the charge paid, credits the merchant, audits it", async () => {
    const cents = 250;
    const value = BigInt(cents) * UNITS_PER_CENT;
    const charge = await createCharge(merchant.apiKey, cents, { description: "settled on chain" });
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const payerBefore = await tokenBalance(payer());
    const payTo = await payToOf(x402Path(charge.chargeId));
    const payToBefore = await tokenBalance(payTo);
    const { header, payload } = await xPaymentHeader(PAYER, value, { to: payTo });
    expect(header).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);

    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      chargeId: charge.chargeId,
      status: "paid",
      settlement: {
        success: true,
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/i),
        settlementId: expect.stringMatching(/^xpay_/),
      },
    });
    const transaction = res.body.settlement.transaction as Hex;
    // v1 names the network; v2 gives its CAIP-2 id.
    for (const [name, network] of [
      ["X-PAYMENT-RESPONSE", "base-sepolia"],
      ["PAYMENT-RESPONSE", "eip155:84532"],
    ] as const) {
      const settlement = decodeHeader(res.headers.get(name));
      expect(settlement).toMatchObject({ success: true, transaction, network });
      expect(String(settlement.payer).toLowerCase()).toBe(payer().toLowerCase());
    }

    // On chain: the receipt, the payer's balance fell by exactly the amount, the charge's address received it.
    await expectTransferOnChain(transaction, payer(), value, payTo);
    expect(await tokenBalance(payer())).toBe(payerBefore - value);
    expect(payToBefore).toBe(0n);
    expect(await tokenBalance(payTo)).toBe(value);
    expect(
      await publicClient().readContract({
        address: chain().token,
        abi: TOKEN_ABI,
        functionName: "authorizationState",
        args: [payer(), payload.authorization.nonce],
      }),
    ).toBe(true);

    // The charge and the merchant.
    const read = await getCharge(charge.chargeId);
    expect(read).toMatchObject({
      chargeId: charge.chargeId,
      status: "paid",
      method: "x402",
      reference: transaction,
      agentId: null,
    });
    expect(read.paidAt).toBeTruthy();
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);

    // The ledger and the audit chain.
    const audit = await env.DB.prepare(
      "SELECT type, charge_id AS chargeId, merchant_id AS merchantId, amount_minor AS amountMinor, data FROM audit_events WHERE reference = ?",
    )
      .bind(transaction)
      .all<{ type: string; chargeId: string; merchantId: string; amountMinor: number; data: string }>();
    expect(audit.results).toHaveLength(1);
    expect(audit.results[0]).toMatchObject({
      type: "charge.paid",
      chargeId: charge.chargeId,
      merchantId: merchant.merchantId,
      amountMinor: cents,
    });
    expect(JSON.parse(audit.results[0]!.data)).toMatchObject({ method: "x402" });
    const postings = await env.DB.prepare(
      "SELECT account, amount_minor AS amountMinor FROM ledger_entries WHERE transfer_id = ?",
    )
      .bind(transaction)
      .all<{ account: string; amountMinor: number }>();
    expect(postings.results.find((p) => p.account === `merchant:${merchant.merchantId}`)?.amountMinor).toBe(cents);
    expect(postings.results.reduce((sum, p) => sum + p.amountMinor, 0)).toBe(0);
    expect((await auditVerify()).ok).toBe(true);

    // Paid: the GET without a payment answers 200 with the charge.
    const again = await api("GET", x402Path(charge.chargeId));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      chargeId: charge.chargeId,
      status: "paid",
      method: "x402",
      reference: transaction,
    });

    // The same X-PAYMENT again: the same settlement, nothing more moves.
    const payerAfter = await tokenBalance(payer());
    const resent = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(resent.status).toBe(200);
    expect(resent.body.settlement?.transaction ?? resent.body.reference).toBe(transaction);
    expect(await tokenBalance(payer())).toBe(payerAfter);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    const rows = await env.DB.prepare("SELECT status FROM x402_payments WHERE charge_id = ?")
      .bind(charge.chargeId)
      .all<{ status: string }>();
    expect(rows.results).toEqual([{ status: "settled" }]);
    expect((await getCharge(charge.chargeId)).reference).toBe(transaction);
  });

  it("a payment by GET with X-PAYMENT delivers charge.succeeded (method x402) to the merchant's endpoint", async () => {
    const cents = 188;
    const charge = await createCharge(merchant.apiKey, cents);
    const { header } = await xPaymentFor(x402Path(charge.chargeId), PAYER, BigInt(cents) * UNITS_PER_CENT);
    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(res.status).toBe(200);
    const transaction = res.body.settlement.transaction as Hex;
    // The event is written with the payment, in the same batch.
    const outbox = await env.DB.prepare(
      "SELECT type FROM outbox_events WHERE type = 'charge.succeeded' AND data LIKE ?",
    )
      .bind(`%${charge.chargeId}%`)
      .all<{ type: string }>();
    expect(outbox.results).toHaveLength(1);
    // Nothing else happens after the payment: the event must reach the receiver on its own.
    const got = await waitForReceived(hook, (list) =>
      list.some((d) => JSON.parse(d.body).data?.chargeId === charge.chargeId),
    );
    const delivery = got.find((d) => JSON.parse(d.body).data?.chargeId === charge.chargeId)!;
    const event = JSON.parse(delivery.body);
    expect(event.type).toBe("charge.succeeded");
    expect(delivery.headers["x-service-event"]).toBe("charge.succeeded");
    expect(event.data).toMatchObject({
      chargeId: charge.chargeId,
      merchantId: merchant.merchantId,
      amountMinor: cents,
      currency: "USD",
      method: "x402",
      reference: transaction,
    });
  });

  it("X-PAYMENT in base64url (the spec's encoding) settles", async () => {
    const cents = 137;
    const value = BigInt(cents) * UNITS_PER_CENT;
    const charge = await createCharge(merchant.apiKey, cents);
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const payerBefore = await tokenBalance(payer());
    const payTo = await payToOf(x402Path(charge.chargeId));
    const { header } = await xPaymentHeader(PAYER, value, { urlSafe: true, to: payTo });
    expect(header).toMatch(/^[A-Za-z0-9_-]+$/);

    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ chargeId: charge.chargeId, status: "paid", settlement: { success: true } });
    const transaction = res.body.settlement.transaction as Hex;
    await expectTransferOnChain(transaction, payer(), value, payTo);
    expect(await tokenBalance(payer())).toBe(payerBefore - value);
    expect(await getCharge(charge.chargeId)).toMatchObject({ status: "paid", method: "x402", reference: transaction });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
  });

  it("a v2 PAYMENT-SIGNATURE built from the PAYMENT-REQUIRED offer settles", async () => {
    const cents = 421;
    const value = BigInt(cents) * UNITS_PER_CENT;
    const charge = await createCharge(merchant.apiKey, cents, { description: "paid with v2" });
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const payerBefore = await tokenBalance(payer());

    const offer = await api("GET", x402Path(charge.chargeId));
    expect(offer.status).toBe(402);
    const required = decodeHeader(offer.headers.get("PAYMENT-REQUIRED"));
    const accepted = required.accepts[0];
    const payload = await signAuthorization(PAYER, BigInt(accepted.amount), { to: accepted.payTo });
    const header = toBase64(JSON.stringify({ x402Version: 2, resource: required.resource, accepted, payload }));

    const res = await api("GET", x402Path(charge.chargeId), { headers: { "PAYMENT-SIGNATURE": header } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ chargeId: charge.chargeId, status: "paid", settlement: { success: true } });
    const transaction = res.body.settlement.transaction as Hex;
    const settlement = decodeHeader(res.headers.get("PAYMENT-RESPONSE"));
    expect(settlement).toMatchObject({ success: true, transaction });
    expect(String(settlement.payer).toLowerCase()).toBe(payer().toLowerCase());
    await expectTransferOnChain(transaction, payer(), value, accepted.payTo);
    expect(await tokenBalance(payer())).toBe(payerBefore - value);
    expect(await getCharge(charge.chargeId)).toMatchObject({ status: "paid", method: "x402", reference: transaction });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
  });
});
