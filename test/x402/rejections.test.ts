import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { getCharge as readChargeRow } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { type Facilitator, remoteFacilitator } from "../../src/x402/facilitator";
import { payWithX402 } from "../../src/x402/service";
import { api, BASE, consoleToken } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import {
  chain,
  payToOf,
  publicClient,
  refuseAtRelay,
  TOKEN_ABI,
  tokenBalance,
  xPaymentFor,
  xPaymentHeader,
} from "../helpers/x402";

/*
 * Invalid x402 payments: each is answered 402 "Pago inválido", the charge stays
 * pending and payable, and nothing moves on chain. Payer: account 6, used by no
 * other test file. The flagged-payer case blocklists account 6 in this file's
 * database, so it runs last.
 */
const PAYER = 6;
/** Another key and address, belonging to no funded account. */
const OTHER_KEY = generatePrivateKey();
const OTHER_ADDRESS = privateKeyToAccount(OTHER_KEY).address;
const CENTS = 130;
const VALUE = BigInt(CENTS) * 10_000n;

const payer = () => chain().accounts[PAYER]!.address;
const x402Path = (chargeId: string) => `/charges/${chargeId}/x402`;
const toBase64 = (text: string) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));
const authorizationUsed = (from: Hex, nonce: Hex) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [from, nonce],
  });

/** An X-PAYMENT header for the charge at `path`, signed by an arbitrary key (a payer that is not one of the chain's funded accounts). */
async function headerForKey(path: string, privateKey: Hex, value: bigint) {
  const { header, payload } = await xPaymentFor(path, privateKey, value);
  return { header, payload, address: payload.authorization.from };
}

/**
 * Now, once the chain's clock is at most 4 s ahead of it. Anvil gives each block a timestamp at
 * least one second after the last, so bursts of blocks (other files settling) run the chain's
 * clock ahead of the wall clock until it catches up.
 */
async function clockCaughtUp(): Promise<bigint> {
  for (let tries = 0; ; tries++) {
    const chainTime = (await publicClient().getBlock()).timestamp;
    if (chainTime <= nowSeconds() + 4n || tries === 60) return nowSeconds();
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

let merchant: { merchantId: string; apiKey: string };

beforeAll(async () => {
  merchant = await createMerchant({ name: "Strict Shop" });
});

/** Sends `header` for a fresh charge and checks the rejection: 402 Pago inválido, terms again, charge pending, nothing moved. */
async function expectRejected(header: string, options: { from: Hex; nonce?: Hex; reason: string; chargeId?: string }) {
  const chargeId = options.chargeId ?? (await createCharge(merchant.apiKey, CENTS)).chargeId;
  const merchantBefore = await merchantBalance(merchant.apiKey);
  const before = await tokenBalance(options.from);
  const res = await api("GET", x402Path(chargeId), { headers: { "X-PAYMENT": header } });
  expect(res.status).toBe(402);
  expect(res.body.error).toBe("Pago inválido");
  expect(res.body.x402Version).toBe(1);
  expect(res.body.accepts?.[0]).toMatchObject({
    scheme: "exact",
    maxAmountRequired: VALUE.toString(),
    payTo: await payToOf(x402Path(chargeId)),
  });
  expect(res.headers.get("PAYMENT-REQUIRED")).toBeTruthy();
  expect(res.body.invalidReason).toBe(options.reason);
  expect(res.headers.get("X-PAYMENT-RESPONSE")).toBeNull();

  const charge = await api("GET", `/charges/${chargeId}`);
  expect(charge.body).toMatchObject({ status: "pending", method: null, reference: null, paidAt: null });
  expect(await tokenBalance(options.from)).toBe(before);
  if (options.nonce) expect(await authorizationUsed(options.from, options.nonce)).toBe(false);
  expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore);
  // Still open to payment: no claim is left behind by a rejected attempt.
  const claim = await env.DB.prepare("SELECT x402_claim AS claim FROM charges WHERE id = ?")
    .bind(chargeId)
    .first<{ claim: string | null }>();
  expect(claim?.claim).toBeNull();
  return { chargeId, res };
}

describe("rejected x402 payments", () => {
  const now = nowSeconds();
  const cases: {
    name: string;
    build: (to: Hex) => Promise<{ header: string; payload: { authorization: { nonce: Hex } } }>;
    reason: string;
  }[] = [
    {
      name: "wrong amount (one cent short)",
      build: (to) => xPaymentHeader(PAYER, VALUE - 10_000n, { to }),
      reason: "invalid_exact_evm_payload_authorization_value",
    },
    {
      name: "wrong amount (one cent over)",
      build: (to) => xPaymentHeader(PAYER, VALUE + 10_000n, { to }),
      reason: "invalid_exact_evm_payload_authorization_value",
    },
    {
      name: "wrong payTo",
      build: () => xPaymentHeader(PAYER, VALUE, { to: OTHER_ADDRESS }),
      reason: "invalid_exact_evm_payload_recipient_mismatch",
    },
    // What every charge advertised before receiving addresses: it would pay any charge of the amount.
    {
      name: "the settlement address, not the charge's own",
      build: () => xPaymentHeader(PAYER, VALUE, { to: chain().payTo }),
      reason: "invalid_exact_evm_payload_recipient_mismatch",
    },
    {
      name: "wrong asset (signed for another token contract)",
      build: (to) =>
        xPaymentHeader(PAYER, VALUE, { to, verifyingContract: "0x000000000000000000000000000000000000dEaD" }),
      reason: "invalid_exact_evm_payload_signature",
    },
    {
      name: "wrong network name",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, network: "base" }),
      reason: "invalid_network",
    },
    {
      name: "a CAIP-2 network id in a v1 payload",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, network: "eip155:84532" }),
      reason: "invalid_network",
    },
    // Within the 30 s allowed for clock skew, so the offline checks pass; the token itself refuses it
    // yet (block.timestamp must be past validAfter), which the gas estimate, running the transfer, finds.
    {
      name: "validAfter 25 s ahead: the chain's dry run of the transfer reverts",
      build: async (to) => xPaymentHeader(PAYER, VALUE, { to, validAfter: (await clockCaughtUp()) + 25n }),
      reason: "invalid_exact_evm_transaction_simulation_failed",
    },
    {
      name: "expired validBefore",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, validAfter: now - 3_600n, validBefore: now - 60n }),
      reason: "invalid_exact_evm_payload_authorization_valid_before",
    },
    {
      name: "validBefore too close to now to settle",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, validBefore: nowSeconds() + 2n }),
      reason: "invalid_exact_evm_payload_authorization_valid_before",
    },
    {
      name: "not yet valid (validAfter far in the future)",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, validAfter: now + 86_400n, validBefore: now + 86_400n + 300n }),
      reason: "invalid_exact_evm_payload_authorization_valid_after",
    },
    {
      name: "window longer than X402_MAX_AUTHORIZATION_SECONDS (a day)",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, validBefore: now + 30n * 86_400n }),
      reason: "invalid_exact_evm_payload_authorization_valid_before",
    },
    {
      name: "signature by another key",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, signerKey: OTHER_KEY }),
      reason: "invalid_exact_evm_payload_signature",
    },
    {
      name: "wrong EIP-712 domain name",
      build: (to) => xPaymentHeader(PAYER, VALUE, { to, domainName: "USDC" }),
      reason: "invalid_exact_evm_payload_signature",
    },
  ];

  for (const c of cases) {
    it(`${c.name}: 402 Pago inválido, charge pending, no tokens move`, async () => {
      const { chargeId } = await createCharge(merchant.apiKey, CENTS);
      const { header, payload } = await c.build(await payToOf(x402Path(chargeId)));
      await expectRejected(header, { from: payer(), nonce: payload.authorization.nonce, reason: c.reason, chargeId });
    });
  }

  it("garbage headers: 402 Pago inválido, charge pending, no tokens move", async () => {
    const garbage = [
      "not a payment!!",
      "aGVsbG8gd29ybGQ=", // base64 of "hello world"
      toBase64(JSON.stringify({})),
      toBase64(
        JSON.stringify({
          x402Version: 1,
          scheme: "exact",
          network: "base-sepolia",
          payload: { signature: "0x12", authorization: {} },
        }),
      ),
      toBase64(
        JSON.stringify({
          x402Version: 3,
          scheme: "exact",
          network: "base-sepolia",
          payload: (await xPaymentHeader(PAYER, VALUE, { to: chain().payTo })).payload,
        }),
      ),
      "x".repeat(20_000),
    ];
    for (const header of garbage) await expectRejected(header, { from: payer(), reason: "invalid_payload" });
  });

  it("an unknown charge: 404 charge_not_found with a good payment or garbage, nothing reserved, no tokens move", async () => {
    const { header, payload } = await xPaymentHeader(PAYER, VALUE, { to: chain().payTo });
    const before = await tokenBalance(payer());
    for (const sent of [header, "not a payment!!"]) {
      const res = await api("GET", x402Path("chg_doesnotexist000000000000"), { headers: { "X-PAYMENT": sent } });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: "charge_not_found" });
    }
    const reserved = await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE nonce = ?")
      .bind(payload.authorization.nonce.toLowerCase())
      .first<{ n: number }>();
    expect(reserved?.n).toBe(0);
    expect(await authorizationUsed(payer(), payload.authorization.nonce)).toBe(false);
    expect(await tokenBalance(payer())).toBe(before);
  });

  it("a v2 payload whose accepted offer differs from ours (amount) is refused", async () => {
    const chargeId = (await createCharge(merchant.apiKey, CENTS)).chargeId;
    const payTo = await payToOf(x402Path(chargeId));
    const { payload } = await xPaymentHeader(PAYER, VALUE, { to: payTo });
    const accepted = {
      scheme: "exact",
      network: "eip155:84532",
      amount: (VALUE - 1n).toString(),
      asset: chain().token,
      payTo,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2" },
    };
    const header = toBase64(JSON.stringify({ x402Version: 2, accepted, payload }));
    const before = await tokenBalance(payer());
    const res = await api("GET", x402Path(chargeId), { headers: { "PAYMENT-SIGNATURE": header } });
    expect(res.status).toBe(402);
    expect(res.body.error).toBe("Pago inválido");
    expect(await tokenBalance(payer())).toBe(before);
    expect(await authorizationUsed(payer(), payload.authorization.nonce)).toBe(false);
    expect((await api("GET", `/charges/${chargeId}`)).body.status).toBe("pending");
  });

  it("a payload that settled one charge, replayed onto another: 402, no second transfer, one credit", async () => {
    const first = await createCharge(merchant.apiKey, CENTS);
    const second = await createCharge(merchant.apiKey, CENTS);
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const before = await tokenBalance(payer());
    const { header, payload } = await xPaymentFor(x402Path(first.chargeId), PAYER, VALUE);
    const paid = await api("GET", x402Path(first.chargeId), { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    expect(await tokenBalance(payer())).toBe(before - VALUE);
    expect(await authorizationUsed(payer(), payload.authorization.nonce)).toBe(true);

    await expectRejected(header, {
      from: payer(),
      reason: "invalid_exact_evm_nonce_already_used",
      chargeId: second.chargeId,
    });
    expect(await tokenBalance(payer())).toBe(before - VALUE);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + CENTS);
    expect((await api("GET", `/charges/${first.chargeId}`)).body).toMatchObject({
      status: "paid",
      reference: paid.body.settlement.transaction,
    });
    // The reservation still points at the first charge.
    const rows = await env.DB.prepare("SELECT charge_id AS chargeId, status FROM x402_payments WHERE nonce = ?")
      .bind(payload.authorization.nonce.toLowerCase())
      .all();
    expect(rows.results).toEqual([{ chargeId: first.chargeId, status: "settled" }]);
  });

  it("the same payload replayed onto a checkout link: 402, no second transfer", async () => {
    const charge = await createCharge(merchant.apiKey, CENTS);
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: CENTS, description: "replay target" },
    });
    expect(link.status).toBe(201);
    const { header } = await xPaymentFor(x402Path(charge.chargeId), PAYER, VALUE);
    expect((await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } })).status).toBe(200);
    const before = await tokenBalance(payer());
    const replay = await api("POST", `/checkout/${link.body.checkoutToken}/x402`, { headers: { "X-PAYMENT": header } });
    expect(replay.status).toBe(402);
    expect(replay.body.error).toBe("Pago inválido");
    expect(await tokenBalance(payer())).toBe(before);
    const links = await api("GET", "/merchant/checkout-links", { token: merchant.apiKey });
    expect(
      links.body.links.find((l: { checkoutToken: string }) => l.checkoutToken === link.body.checkoutToken),
    ).toMatchObject({ paymentsCount: 0, totalPaidMinor: 0 });
  });

  it("a payer without funds: 402, nothing moves", async () => {
    const key = generatePrivateKey();
    const { chargeId } = await createCharge(merchant.apiKey, CENTS);
    const { header, payload, address } = await headerForKey(x402Path(chargeId), key, VALUE);
    expect(await tokenBalance(address)).toBe(0n);
    await expectRejected(header, {
      from: address,
      nonce: payload.authorization.nonce,
      reason: "insufficient_funds",
      chargeId,
    });
    expect(await tokenBalance(address)).toBe(0n);
  });

  it("a failed attempt leaves the charge payable: after a rejection the same charge is paid with a correct payment", async () => {
    const charge = await createCharge(merchant.apiKey, CENTS);
    const wrong = await xPaymentFor(x402Path(charge.chargeId), PAYER, VALUE - 10_000n);
    const { chargeId } = await expectRejected(wrong.header, {
      from: payer(),
      nonce: wrong.payload.authorization.nonce,
      reason: "invalid_exact_evm_payload_authorization_value",
      chargeId: charge.chargeId,
    });
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const before = await tokenBalance(payer());
    const right = await xPaymentFor(x402Path(chargeId), PAYER, VALUE);
    const res = await api("GET", x402Path(chargeId), { headers: { "X-PAYMENT": right.header } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ chargeId, status: "paid", settlement: { success: true } });
    expect(await tokenBalance(payer())).toBe(before - VALUE);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + CENTS);
    expect((await api("GET", `/charges/${chargeId}`)).body).toMatchObject({
      status: "paid",
      method: "x402",
      reference: res.body.settlement.transaction,
    });
  });

  it("the chain cannot be read while verifying: 503 chain_unavailable, nothing reserved; the same payment sent again settles", async () => {
    const charge = await createCharge(merchant.apiKey, CENTS);
    const before = await tokenBalance(payer());
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), PAYER, VALUE);
    // The RPC answers the verification's batch (which names the payer) with HTTP 500.
    await refuseAtRelay({ containing: payer(), method: "eth_call", times: 1, httpStatus: 500 });

    const refused = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({ error: "chain_unavailable" });
    expect(refused.headers.get("Retry-After")).toBe("5");
    expect(
      await env.DB.prepare("SELECT status, x402_claim AS claim FROM charges WHERE id = ?")
        .bind(charge.chargeId)
        .first(),
    ).toEqual({ status: "pending", claim: null });
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE nonce = ?")
        .bind(payload.authorization.nonce.toLowerCase())
        .first(),
    ).toEqual({ n: 0 });
    expect(await tokenBalance(payer())).toBe(before);

    const retried = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ chargeId: charge.chargeId, status: "paid", settlement: { success: true } });
    expect(await tokenBalance(payer())).toBe(before - VALUE);
  });

  it("a remote facilitator that cannot be reached to verify: unavailable (503 facilitator_unavailable), nothing reserved", async () => {
    const charge = await createCharge(merchant.apiKey, CENTS);
    const row = await readChargeRow(env.DB, charge.chargeId);
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), PAYER, VALUE);
    // Nothing listens on the discard port: the connection is refused.
    const unreachable = remoteFacilitator(settingsOf(env).x402!, "http://127.0.0.1:9/");
    const outcome = await payWithX402(
      env,
      { kind: "charge", charge: row! },
      `${BASE}${x402Path(charge.chargeId)}`,
      header,
      unreachable,
    );
    expect(outcome).toMatchObject({ kind: "unavailable", error: "facilitator_unavailable" });
    expect(
      await env.DB.prepare("SELECT status, x402_claim AS claim FROM charges WHERE id = ?")
        .bind(charge.chargeId)
        .first(),
    ).toEqual({ status: "pending", claim: null });
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM x402_payments WHERE nonce = ?")
        .bind(payload.authorization.nonce.toLowerCase())
        .first(),
    ).toEqual({ n: 0 });
  });

  it("a failed settlement (facilitator reports failure) answers Liquidación fallida and leaves the charge payable", async () => {
    const charge = await createCharge(merchant.apiKey, CENTS);
    const row = await readChargeRow(env.DB, charge.chargeId);
    const failing: Facilitator = {
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "failed", reason: "test_settlement_failed" }),
    };
    const before = await tokenBalance(payer());
    const { header } = await xPaymentFor(x402Path(charge.chargeId), PAYER, VALUE);
    const outcome = await payWithX402(
      env,
      { kind: "charge", charge: row! },
      `${BASE}${x402Path(charge.chargeId)}`,
      header,
      failing,
    );
    expect(outcome.kind).toBe("settle_failed");
    expect(await tokenBalance(payer())).toBe(before);
    const stored = await env.DB.prepare("SELECT status, x402_claim AS claim FROM charges WHERE id = ?")
      .bind(charge.chargeId)
      .first();
    expect(stored).toEqual({ status: "pending", claim: null });
    // The client may retry, even with the same authorization, since it was never used.
    const retried = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(retried.status).toBe(200);
    expect(await tokenBalance(payer())).toBe(before - VALUE);
    expect(settingsOf(env).x402?.network).toBe("base-sepolia");
  });

  it("a payer flagged by KYT: 402, nothing moves", async () => {
    const token = await consoleToken();
    const listed = await api("POST", "/console/kyt/blocklist", {
      token,
      body: { address: payer(), reason: "test: flagged payer" },
    });
    expect(listed.status).toBe(201);
    const { chargeId } = await createCharge(merchant.apiKey, CENTS);
    const { header, payload } = await xPaymentFor(x402Path(chargeId), PAYER, VALUE);
    await expectRejected(header, {
      from: payer(),
      nonce: payload.authorization.nonce,
      reason: "invalid_payment",
      chargeId,
    });
  });
});
