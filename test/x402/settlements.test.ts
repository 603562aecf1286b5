import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { getCharge as readChargeRow } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import type { Facilitator } from "../../src/x402/facilitator";
import { PROTOCOL_REASONS, protocolReason } from "../../src/x402/reasons";
import { reconcileOpenPayments } from "../../src/x402/reconcile";
import { payWithX402 } from "../../src/x402/service";
import { api, BASE } from "../helpers/api";
import { createAgent, createCharge, createCheckoutLink, createMerchant, payCharge } from "../helpers/factories";
import {
  chain,
  freshPayer,
  type Payer,
  publicClient,
  signAuthorization,
  submitAuthorization,
  TOKEN_ABI,
  tokenBalance,
  xPaymentFor,
} from "../helpers/x402";

/*
 * Section 14 of the x402 contract on the real local chain: authorization windows as the reference
 * facilitator takes them, the settlement status resource, and the v2 payment-identifier extension.
 * Every payer is a fresh key with its balance set on the chain, so every delta here is exact.
 */
const CENTS = 25;
const VALUE = BigInt(CENTS) * 10_000n;
const HOUR = 3600n;
const x402Path = (chargeId: string) => `/charges/${chargeId}/x402`;
const now = () => BigInt(Math.floor(Date.now() / 1000));

const toBase64 = (text: string) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
const fromBase64 = (value: string) =>
  JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(value), (c) => c.charCodeAt(0))));

/** The v2 PaymentRequired of a resource, from its 402's PAYMENT-REQUIRED header. */
async function paymentRequiredOf(path: string, method: "GET" | "POST" = "GET") {
  const res = await api(method, path);
  expect(res.status, `terms of ${path}`).toBe(402);
  return fromBase64(res.headers.get("payment-required")!);
}

/**
 * A v2 PAYMENT-SIGNATURE as @x402/fetch builds one: the accepted requirements, the signed
 * authorization and the server's extensions echoed, with the payment identifier's id filled in.
 */
async function v2Payment(
  path: string,
  payer: Payer,
  options: { paymentId?: string; validBefore?: bigint; method?: "GET" | "POST" } = {},
) {
  const required = await paymentRequiredOf(path, options.method);
  const accepted = required.accepts[0];
  const payload = await signAuthorization(payer.key, BigInt(accepted.amount), {
    to: accepted.payTo,
    ...(options.validBefore ? { validBefore: options.validBefore } : {}),
  });
  const extensions = structuredClone(required.extensions ?? {});
  if (options.paymentId) extensions["payment-identifier"].info.id = options.paymentId;
  const json = { x402Version: 2, resource: required.resource, accepted, payload, extensions };
  return { header: toBase64(JSON.stringify(json)), payload };
}

const pay = (path: string, header: string, method: "GET" | "POST" = "GET") =>
  api(method, path, { headers: { "PAYMENT-SIGNATURE": header } });

const settlementOf = (settlementId: string) => api("GET", `/x402/settlements/${settlementId}`);
const settlementByAuthorization = (payer: string, nonce: string) =>
  api("GET", `/x402/settlements?payer=${payer}&nonce=${nonce}`);

const authorizationUsed = (payer: Hex, nonce: Hex) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [payer, nonce],
  });

async function paidCharges(merchantKey: string) {
  const res = await api("GET", "/merchant/charges", { token: merchantKey });
  expect(res.status).toBe(200);
  return (res.body.charges as { status: string; chargeId: string }[]).filter((c) => c.status === "paid");
}

let merchant: { merchantId: string; apiKey: string };
beforeAll(async () => {
  merchant = await createMerchant({ name: "Section 14 Shop" });
});

describe("authorization windows", () => {
  it.each([
    ["ten minutes", 600n],
    ["23 hours", 23n * HOUR],
  ])("a hand-built EIP-3009 authorization valid for %s settles", async (_label, seconds) => {
    const payer = await freshPayer(VALUE);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const { header } = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE, {
      validBefore: now() + seconds,
    });
    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ chargeId: charge.chargeId, status: "paid", settlement: { success: true } });
    expect(await tokenBalance(payer.address)).toBe(0n);
  });

  it("a 25-hour authorization is refused with a protocol reason, and nothing is reserved or moved", async () => {
    const payer = await freshPayer(VALUE);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE, {
      validBefore: now() + 25n * HOUR,
    });
    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({
      error: "Pago inválido",
      invalidReason: "invalid_exact_evm_payload_authorization_valid_before",
    });
    // A version 2 client reads only the header: the reason is its `error`.
    expect(fromBase64(res.headers.get("payment-required")!).error).toBe(
      "invalid_exact_evm_payload_authorization_valid_before",
    );
    expect(await tokenBalance(payer.address)).toBe(VALUE);
    expect((await settlementByAuthorization(payer.address, payload.authorization.nonce)).status).toBe(404);
    // The same charge still takes a payment within the window.
    const ok = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE, { validBefore: now() + 24n * HOUR });
    expect((await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": ok.header } })).status).toBe(200);
  });

  it("validAfter in the future (past the documented skew) is refused as the reference names it", async () => {
    const payer = await freshPayer(VALUE);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const { header } = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE, { validAfter: now() + 120n });
    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(res.body.invalidReason).toBe("invalid_exact_evm_payload_authorization_valid_after");
  });

  it("the service's own reasons are answered in the protocol's words", () => {
    const cases: [string, "verify" | "settle", string][] = [
      ["invalid_exact_evm_payload_signature", "verify", "invalid_exact_evm_payload_signature"],
      [
        "invalid_exact_evm_payload_authorization_window_too_long",
        "verify",
        "invalid_exact_evm_payload_authorization_valid_before",
      ],
      ["payer_blocked", "verify", "invalid_payment"],
      ["invalid_asset", "verify", "invalid_payment_requirements"],
      ["charge_settlement_in_progress", "verify", "invalid_transaction_state"],
      [
        "simulation_failed: execution reverted: FiatTokenV2: invalid signature",
        "verify",
        "invalid_exact_evm_transaction_simulation_failed",
      ],
      ["some_private_code", "verify", "unexpected_verify_error"],
      ["transaction_reverted", "settle", "invalid_exact_evm_transaction_failed"],
      ["broadcast_failed: nonce too low", "settle", "unexpected_settle_error"],
      ["authorization_expired_unused", "settle", "payment_expired"],
    ];
    for (const [reason, phase, expected] of cases) expect(protocolReason(reason, phase), reason).toBe(expected);
    for (const [reason, phase] of cases) expect(PROTOCOL_REASONS).toContain(protocolReason(reason, phase));
  });
});

describe("the settlement status resource", () => {
  it("a paid answer names its settlement; the resource and the lookup by authorization answer it settled", async () => {
    const payer = await freshPayer(VALUE);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE);
    const paid = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    const { settlementId, transaction } = paid.body.settlement;
    expect(settlementId).toMatch(/^xpay_/);

    const expected = {
      settlementId,
      status: "settled",
      chargeId: charge.chargeId,
      network: `eip155:${settingsOf(env).x402!.chainId}`,
      payer: payer.address.toLowerCase(),
      transaction,
      errorReason: null,
    };
    const byId = await settlementOf(settlementId);
    expect(byId.status).toBe(200);
    expect(byId.body).toEqual(expected);
    expect(byId.headers.get("cache-control")).toBe("no-store");
    const byAuthorization = await settlementByAuthorization(payer.address, payload.authorization.nonce);
    expect(byAuthorization.body).toEqual(expected);
    // The payer's address in any case finds it.
    expect(
      (await settlementByAuthorization(payer.address.toUpperCase().replace("0X", "0x"), payload.authorization.nonce))
        .body,
    ).toEqual(expected);
  });

  it("unknown settlements are 404 settlement_not_found; malformed lookups are 400", async () => {
    expect((await settlementOf("xpay_doesnotexist")).body).toEqual({ error: "settlement_not_found" });
    const unknown = await settlementByAuthorization(`0x${"1".repeat(40)}`, `0x${"2".repeat(64)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe("settlement_not_found");
    for (const query of ["", "?payer=0x12", `?payer=0x${"1".repeat(40)}`, `?payer=0x${"1".repeat(40)}&nonce=0x12`]) {
      const res = await api("GET", `/x402/settlements${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error).toBe("invalid_request");
    }
  });

  it("a failed settlement says so with the protocol's reason, and the charge takes another payment", async () => {
    const payer = await freshPayer(VALUE * 2n);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const { header } = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE);
    const reverting: Facilitator = {
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "failed", reason: "transaction_reverted" }),
    };
    const row = await readChargeRow(env.DB, charge.chargeId);
    const outcome = await payWithX402(
      env,
      { kind: "charge", charge: row! },
      `${BASE}${x402Path(charge.chargeId)}`,
      header,
      reverting,
    );
    expect(outcome).toMatchObject({ kind: "settle_failed", reason: "transaction_reverted" });
    const found = await env.DB.prepare("SELECT id FROM x402_payments WHERE charge_id = ?")
      .bind(charge.chargeId)
      .first<{ id: string }>();
    const failed = await settlementOf(found!.id);
    expect(failed.body).toMatchObject({
      status: "failed",
      chargeId: charge.chargeId,
      transaction: null,
      errorReason: "invalid_exact_evm_transaction_failed",
    });
    // Over HTTP the same failure is answered with the protocol's code too.
    const again = await xPaymentFor(x402Path(charge.chargeId), payer.key, VALUE);
    const res = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": again.header } });
    expect(res.status).toBe(200);
  });
});

describe("the payment-identifier extension", () => {
  const paymentId = () => `pay_${crypto.randomUUID().replace(/-/g, "")}`;

  const createLink = async () =>
    `/checkout/${(await createCheckoutLink(merchant.apiKey, CENTS, "identified purchase")).checkoutToken}/x402`;

  it("is declared in PAYMENT-REQUIRED as optional, with its schema", async () => {
    const required = await paymentRequiredOf(await createLink());
    expect(required.extensions["payment-identifier"]).toMatchObject({
      info: { required: false },
      schema: { type: "object", required: ["required"], properties: { id: { minLength: 16, maxLength: 128 } } },
    });
  });

  it("a retry with a new authorization and the same id gets the original outcome, and pays nothing more", async () => {
    const path = await createLink();
    const payer = await freshPayer(VALUE * 3n);
    const id = paymentId();
    const first = await pay(path, (await v2Payment(path, payer, { paymentId: id })).header);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const retry = await v2Payment(path, payer, { paymentId: id });
    const second = await pay(path, retry.header);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(await tokenBalance(payer.address)).toBe(VALUE * 2n);
    // The retry's own authorization was never reserved, so it is not a settlement of its own.
    expect((await settlementByAuthorization(payer.address, retry.payload.authorization.nonce)).status).toBe(404);
    // A new id is a new purchase.
    expect((await pay(path, (await v2Payment(path, payer, { paymentId: paymentId() })).header)).status).toBe(200);
    expect(await tokenBalance(payer.address)).toBe(VALUE);
  });

  it("ten payments with one id at once: one settlement, one charge, every answer names it", async () => {
    const path = await createLink();
    const payer = await freshPayer(VALUE * 10n);
    const id = paymentId();
    const headers = await Promise.all(Array.from({ length: 10 }, () => v2Payment(path, payer, { paymentId: id })));
    const answers = await Promise.all(headers.map(({ header }) => pay(path, header)));
    for (const a of answers) expect([200, 202], JSON.stringify(a.body)).toContain(a.status);
    const ids = new Set(answers.map((a) => a.body.settlement.settlementId));
    expect(ids.size).toBe(1);
    const [settlementId] = ids;
    expect(new Set(answers.map((a) => a.body.chargeId)).size).toBe(1);
    for (const a of answers.filter((r) => r.status === 202))
      expect(a.headers.get("location")).toBe(`/x402/settlements/${settlementId}`);
    expect(await tokenBalance(payer.address)).toBe(VALUE * 9n);
    expect((await settlementOf(settlementId!)).body.status).toBe("settled");
    const count = await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE payer = ?")
      .bind(payer.address.toLowerCase())
      .first<{ n: number }>();
    expect(count!.n).toBe(1);
  });

  it("the same id for another purchase is refused, not answered with the first's outcome", async () => {
    const payer = await freshPayer(VALUE * 2n);
    const id = paymentId();
    const firstPath = await createLink();
    expect((await pay(firstPath, (await v2Payment(firstPath, payer, { paymentId: id })).header)).status).toBe(200);
    const otherPath = await createLink();
    const res = await pay(otherPath, (await v2Payment(otherPath, payer, { paymentId: id })).header);
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({ error: "Pago inválido", invalidReason: "invalid_payload" });
    expect(await tokenBalance(payer.address)).toBe(VALUE);
  });

  it("only the payer's signature learns an id's outcome: another payer's id is its own purchase", async () => {
    const path = await createLink();
    const alice = await freshPayer(VALUE);
    const mallory = await freshPayer(VALUE);
    const id = paymentId();
    expect((await pay(path, (await v2Payment(path, alice, { paymentId: id })).header)).status).toBe(200);
    // Mallory copies the id: her payment is hers, settled from her own tokens.
    const res = await pay(path, (await v2Payment(path, mallory, { paymentId: id })).header);
    expect(res.status).toBe(200);
    expect(await tokenBalance(mallory.address)).toBe(0n);
  });

  it("a malformed identifier makes the payment invalid rather than silently unidentified", async () => {
    const path = await createLink();
    const payer = await freshPayer(VALUE);
    for (const bad of ["short", "x".repeat(129), "has spaces in it!!"]) {
      const res = await pay(path, (await v2Payment(path, payer, { paymentId: bad })).header);
      expect(res.status, bad).toBe(402);
      expect(res.body.invalidReason).toBe("invalid_payload");
    }
    expect(await tokenBalance(payer.address)).toBe(VALUE);
  });

  it("a retry of a failed purchase settles the first, still valid authorization again, never a second one", async () => {
    const payer = await freshPayer(VALUE);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const path = x402Path(charge.chargeId);
    const id = paymentId();
    const row = await readChargeRow(env.DB, charge.chargeId);
    const failing: Facilitator = {
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "failed", reason: "transaction_reverted" }),
    };
    const first = await v2Payment(path, payer, { paymentId: id });
    const failed = await payWithX402(env, { kind: "charge", charge: row! }, `${BASE}${path}`, first.header, failing);
    expect(failed.kind).toBe("settle_failed");
    const failedId = (await settlementByAuthorization(payer.address, first.payload.authorization.nonce)).body
      .settlementId;

    const retry = await v2Payment(path, payer, { paymentId: id });
    const res = await pay(path, retry.header);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.settlement.settlementId).toBe(failedId);
    expect(await tokenBalance(payer.address)).toBe(0n);
    expect((await settlementOf(failedId)).body).toMatchObject({ status: "settled", chargeId: charge.chargeId });
    // The retry's own authorization was never used nor reserved: it can never pay too.
    expect(await authorizationUsed(payer.address, retry.payload.authorization.nonce)).toBe(false);
    expect((await settlementByAuthorization(payer.address, retry.payload.authorization.nonce)).status).toBe(404);
    expect((await paidCharges(merchant.apiKey)).map((c) => c.chargeId)).toContain(charge.chargeId);
  });

  it("a retry after the released authorization was used on chain (someone submitted it): pending, then paid once, never a second authorization", async () => {
    const payer = await freshPayer(VALUE * 2n);
    const charge = await createCharge(merchant.apiKey, CENTS);
    const path = x402Path(charge.chargeId);
    const id = paymentId();
    const row = await readChargeRow(env.DB, charge.chargeId);
    const first = await v2Payment(path, payer, { paymentId: id });
    const failing: Facilitator = {
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "failed", reason: "transaction_reverted" }),
    };
    expect(
      (await payWithX402(env, { kind: "charge", charge: row! }, `${BASE}${path}`, first.header, failing)).kind,
    ).toBe("settle_failed");
    const late = await submitAuthorization(first.payload);
    expect(late.status).toBe("success");

    // Before any cron run: the retry learns the purchase may be paid, and is not told to pay again.
    const retry = await v2Payment(path, payer, { paymentId: id });
    const res = await pay(path, retry.header);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.headers.get("location")).toBe(`/x402/settlements/${res.body.settlement.settlementId}`);
    await reconcileOpenPayments(env);
    expect((await settlementOf(res.body.settlement.settlementId)).body).toMatchObject({
      status: "settled",
      transaction: late.transactionHash,
    });
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({ status: "paid", method: "x402" });
    expect(await tokenBalance(payer.address)).toBe(VALUE);
    expect(await authorizationUsed(payer.address, retry.payload.authorization.nonce)).toBe(false);
  });

  it("a forged signature learns nothing of an identifier: the answer is the one any payment gets", async () => {
    const path = await createLink();
    const alice = await freshPayer(VALUE);
    const id = paymentId();
    expect((await pay(path, (await v2Payment(path, alice, { paymentId: id })).header)).status).toBe(200);
    // A charge already paid: the one place an answer could differ (a paid charge answers with itself).
    const charge = await createCharge(merchant.apiKey, CENTS);
    const mallory = await freshPayer(0n);
    const forged = [];
    for (const guess of [id, paymentId()]) {
      const json = fromBase64((await v2Payment(x402Path(charge.chargeId), mallory, { paymentId: guess })).header);
      json.payload.authorization.from = alice.address;
      forged.push(toBase64(JSON.stringify(json)));
    }
    const agent = await createAgent({ credit: CENTS });
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    const answers = [];
    for (const header of forged) answers.push(await pay(x402Path(charge.chargeId), header));
    expect(answers[0]!.status).toBe(200);
    expect(answers[0]!.status).toBe(answers[1]!.status);
    expect(answers[0]!.body).toEqual(answers[1]!.body);
  });
});
