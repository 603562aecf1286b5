import { env } from "cloudflare:workers";
import { type Hex, parseSignature } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, describe, expect, it } from "vitest";
import { getCharge as readChargeRow } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { setFaultHook } from "../../src/lib/faults";
import { builtInFacilitator, type Facilitator, remoteFacilitator } from "../../src/x402/facilitator";
import { reconcileOpenPayments } from "../../src/x402/reconcile";
import { payWithX402 } from "../../src/x402/service";
import { release } from "../../src/x402/settlement";
import { api, BASE, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import {
  chain,
  freshPayer,
  gasWallet,
  type Payer,
  publicClient,
  type SignedAuthorization,
  submitAuthorization,
  tokenBalance,
  xPaymentFor,
} from "../helpers/x402";

/*
 * A settlement reported failed, or credited with an error, after the money
 * may have moved (x402-interop #6, reliability-anchors #24 and #26): the
 * service keeps the charge claimed, answers pending, and reconciliation
 * decides from the chain, crediting the transaction that actually used the
 * authorization exactly once, or releasing one that can never pay.
 */
const CENTS = 150;
const VALUE = BigInt(CENTS) * 10_000n;
const x = () => settingsOf(env).x402!;

/** The payer withdraws its authorization (EIP-3009 cancelAuthorization, as USDC has it). */
async function cancelAuthorization(payer: Payer, nonce: Hex) {
  const signature = await privateKeyToAccount(payer.key).signTypedData({
    domain: { name: "USD Coin", version: "2", chainId: chain().chainId, verifyingContract: chain().token },
    types: {
      CancelAuthorization: [
        { name: "authorizer", type: "address" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "CancelAuthorization",
    message: { authorizer: payer.address, nonce },
  });
  const { r, s, v } = parseSignature(signature);
  const wallet = await gasWallet();
  const hash = await wallet.writeContract({
    chain: null,
    address: chain().token,
    abi: [
      {
        type: "function",
        name: "cancelAuthorization",
        stateMutability: "nonpayable",
        inputs: [
          { name: "a", type: "address" },
          { name: "n", type: "bytes32" },
          { name: "v", type: "uint8" },
          { name: "r", type: "bytes32" },
          { name: "s", type: "bytes32" },
        ],
        outputs: [],
      },
    ],
    functionName: "cancelAuthorization",
    args: [payer.address, nonce, Number(v), r, s],
  });
  expect((await publicClient().waitForTransactionReceipt({ hash })).status).toBe("success");
}

/** A remote facilitator at a host only this file's fetch knows: its /settle runs `settle` and answers what it returns. */
const FACILITATOR = "https://facilitator.settle-outcomes.test/";
function withRemoteFacilitator(settle: (payload: SignedAuthorization) => Promise<Response>): Facilitator {
  const real = globalThis.fetch;
  globalThis.fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input instanceof Request ? input.url : input);
    if (!url.startsWith(FACILITATOR)) return real(input as never, init);
    if (url.endsWith("/verify")) return Response.json({ isValid: true });
    return settle(JSON.parse(String(init?.body)).paymentPayload.payload);
  }) as typeof fetch;
  restore = () => (globalThis.fetch = real);
  return remoteFacilitator(x(), FACILITATOR);
}
let restore = () => {};

/** A remote facilitator that broadcasts the transfer itself, then answers `reply` (`sent` names what it broadcast). */
function broadcastingThen(reply: () => Response) {
  const sent = { transaction: "" };
  const facilitator = withRemoteFacilitator(async (payload) => {
    sent.transaction = (await submitAuthorization(payload)).transactionHash;
    return reply();
  });
  return { facilitator, sent };
}
const settleReply = (errorReason: string) =>
  Response.json({ success: false, errorReason, transaction: "", network: "base-sepolia", payer: "" });
afterEach(() => {
  restore();
  setFaultHook(null);
});

async function setUp() {
  const merchant = await createMerchant({ name: "Settle Outcomes" });
  const charge = await createCharge(merchant.apiKey, CENTS);
  const payer = await freshPayer(10_000_000n);
  const payment = await xPaymentFor(`/charges/${charge.chargeId}/x402`, payer.key, VALUE);
  const row = await readChargeRow(env.DB, charge.chargeId);
  const pay = (facilitator?: Facilitator) =>
    payWithX402(
      env,
      { kind: "charge", charge: row! },
      `${BASE}/charges/${charge.chargeId}/x402`,
      payment.header,
      facilitator,
    );
  const state = async () => ({
    payment: await env.DB.prepare("SELECT status, tx_hash AS txHash, error FROM x402_payments WHERE charge_id = ?")
      .bind(charge.chargeId)
      .first<{ status: string; txHash: string | null; error: string }>(),
    charge: await env.DB.prepare(
      "SELECT status, x402_claim IS NOT NULL AS claimed, reference FROM charges WHERE id = ?",
    )
      .bind(charge.chargeId)
      .first<{ status: string; claimed: number; reference: string | null }>(),
    merchantBalance: await merchantBalance(merchant.apiKey),
  });
  return { merchant, charge, payer, payment, pay, state };
}

/** Reconciles until this charge is decided, and checks what the chain and the ledger say afterwards. */
async function expectCreditedOnce(s: Awaited<ReturnType<typeof setUp>>, transaction: string) {
  await reconcileOpenPayments(env);
  expect(await s.state()).toEqual({
    payment: expect.objectContaining({ status: "settled", txHash: transaction }),
    charge: { status: "paid", claimed: 1, reference: transaction },
    merchantBalance: CENTS,
  });
  await reconcileOpenPayments(env);
  expect(await merchantBalance(s.merchant.apiKey)).toBe(CENTS);
  expect(await tokenBalance(s.payer.address)).toBe(10_000_000n - VALUE);
  // Nobody can pay the charge a second time.
  const agent = await createAgent({ credit: 1000 });
  expect((await payCharge(agent.apiKey, s.charge.chargeId)).status).toBe(409);
  expect((await api("GET", "/console/audit/verify", { token: await consoleToken() })).body.ok).toBe(true);
}

describe("a settlement reported failed after the money moved", () => {
  it("a facilitator that broadcasts, then answers a gateway's 504: pending, not a failure, then credited once", async () => {
    const s = await setUp();
    const { facilitator, sent } = broadcastingThen(() =>
      Response.json({ message: "upstream request timeout" }, { status: 504 }),
    );
    expect(await s.pay(facilitator)).toMatchObject({ kind: "pending", chargeId: s.charge.chargeId });
    expect(await s.state()).toMatchObject({
      payment: { status: "unknown" },
      charge: { status: "pending", claimed: 1 },
    });
    await expectCreditedOnce(s, sent.transaction);
  });

  it("a facilitator that broadcasts, then reports unexpected_settle_error without a hash: pending, then credited once", async () => {
    const s = await setUp();
    const { facilitator, sent } = broadcastingThen(() => settleReply("unexpected_settle_error"));
    expect((await s.pay(facilitator)).kind).toBe("pending");
    await expectCreditedOnce(s, sent.transaction);
  });

  it("a facilitator that reports a definite failure after all: the chain says the authorization is used, so it is pending", async () => {
    const s = await setUp();
    const { facilitator, sent } = broadcastingThen(() => settleReply("invalid_transaction_state"));
    expect((await s.pay(facilitator)).kind).toBe("pending");
    expect((await s.state()).payment).toMatchObject({
      status: "unknown",
      error: "invalid_transaction_state; authorization used on chain",
    });
    await expectCreditedOnce(s, sent.transaction);
  });

  it("someone else submits the authorization before our settler: our transaction reverts, theirs paid us, and theirs is credited", async () => {
    const s = await setUp();
    const inner = builtInFacilitator(env, x());
    let theirs = "";
    const frontRunning: Facilitator = {
      verify: (payment, terms) => inner.verify(payment, terms),
      async settle(payment, terms) {
        theirs = (await submitAuthorization(s.payment.payload)).transactionHash;
        return inner.settle(payment, terms);
      },
    };
    const outcome = await s.pay(frontRunning);
    expect(outcome.kind).toBe("pending");
    expect((await s.state()).payment).toMatchObject({
      status: "unknown",
      error: "transaction_reverted; authorization used on chain",
    });
    await expectCreditedOnce(s, theirs);
  });

  it("reconciliation does not trust the transaction it holds: ours reverted, the one that used the authorization is credited", async () => {
    const s = await setUp();
    const theirs = await submitAuthorization(s.payment.payload);
    // Our own later send of the same authorization: mined, reverted. The facilitator loses the outcome and names it.
    const ours = await submitAuthorization(s.payment.payload);
    expect([theirs.status, ours.status]).toEqual(["success", "reverted"]);
    const outcome = await s.pay({
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "unknown", reason: "receipt_unavailable", transaction: ours.transactionHash }),
    });
    expect(outcome.kind).toBe("pending");
    expect((await s.state()).payment).toMatchObject({ status: "unknown", txHash: ours.transactionHash });
    await expectCreditedOnce(s, theirs.transactionHash);
  });

  it("the ledger fails to credit a settled transfer: pending, not an error, and reconciliation credits it", async () => {
    const s = await setUp();
    setFaultHook((point) => {
      if (point === "ledger.before_batch") throw new Error("injected: ledger unavailable");
    });
    const outcome = await s.pay(builtInFacilitator(env, x()));
    setFaultHook(null);
    expect(outcome.kind).toBe("pending");
    const { payment } = await s.state();
    expect(payment).toMatchObject({ status: "unknown", error: "credit_failed" });
    expect(payment!.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    await expectCreditedOnce(s, payment!.txHash!);
  });
});

describe("a settlement that can never pay", () => {
  it("a facilitator's definite failure with the authorization unused: released, Liquidación fallida, payable again", async () => {
    const s = await setUp();
    const outcome = await s.pay(withRemoteFacilitator(async () => settleReply("insufficient_funds")));
    expect(outcome).toMatchObject({ kind: "settle_failed", reason: "insufficient_funds" });
    expect(await s.state()).toMatchObject({
      payment: { status: "failed" },
      charge: { status: "pending", claimed: 0 },
      merchantBalance: 0,
    });
  });

  it("a released authorization someone submits later (the reverted transaction's calldata is public): its charge is credited with it, once", async () => {
    const s = await setUp();
    const outcome = await s.pay(withRemoteFacilitator(async () => settleReply("insufficient_funds")));
    expect(outcome.kind).toBe("settle_failed");
    const late = await submitAuthorization(s.payment.payload);
    expect(late.status).toBe("success");
    await expectCreditedOnce(s, late.transactionHash);
  });

  it("a released authorization used after the charge was paid another way: never a second credit; marked for an operator", async () => {
    const s = await setUp();
    expect((await s.pay(withRemoteFacilitator(async () => settleReply("insufficient_funds")))).kind).toBe(
      "settle_failed",
    );
    const agent = await createAgent({ credit: 1000 });
    expect((await payCharge(agent.apiKey, s.charge.chargeId)).status).toBe(200);
    expect((await submitAuthorization(s.payment.payload)).status).toBe("success");
    await reconcileOpenPayments(env);
    await reconcileOpenPayments(env);
    expect(await s.state()).toEqual({
      payment: expect.objectContaining({ status: "failed", error: "used_after_release" }),
      charge: expect.objectContaining({ status: "paid", claimed: 0 }),
      merchantBalance: CENTS,
    });
    expect((await api("GET", `/charges/${s.charge.chargeId}`)).body).toMatchObject({ method: "ledger" });
  });

  it("a released authorization used while another payment holds the charge: not given up; once that one fails, the charge is credited with it", async () => {
    const s = await setUp();
    expect((await s.pay(withRemoteFacilitator(async () => settleReply("insufficient_funds")))).kind).toBe(
      "settle_failed",
    );
    const released = (await env.DB.prepare("SELECT id FROM x402_payments WHERE charge_id = ?")
      .bind(s.charge.chargeId)
      .first<string>("id"))!;
    // Another payment of the charge is being settled (its row and claim, as a reservation leaves them).
    const holder = `xpay_holder${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`;
    const x402 = settingsOf(env).x402!;
    const at = new Date().toISOString();
    await env.DB.batch([
      env.DB.prepare(
        `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, value, valid_before, payload, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{}', 'settling', ?, ?)`,
      ).bind(
        holder,
        x402.network,
        x402.asset.toLowerCase(),
        privateKeyToAccount(generatePrivateKey()).address.toLowerCase(),
        `0x${crypto.randomUUID().replace(/-/g, "").padEnd(64, "0")}`,
        s.charge.chargeId,
        VALUE.toString(),
        Math.floor(Date.now() / 1000) + 300,
        at,
        at,
      ),
      env.DB.prepare("UPDATE charges SET x402_claim = ? WHERE id = ?").bind(holder, s.charge.chargeId),
    ]);
    // The released authorization lands on chain meanwhile: the watch cannot take the charge, and waits.
    const late = await submitAuthorization(s.payment.payload);
    await reconcileOpenPayments(env);
    expect(await env.DB.prepare("SELECT status, error FROM x402_payments WHERE id = ?").bind(released).first()).toEqual(
      { status: "failed", error: "insufficient_funds" },
    );
    // The holder fails (the payer's funds went to the released one): the charge is open, and the watch takes it.
    await release(env, holder, s.charge.chargeId, "transaction_reverted", new Date().toISOString());
    for (let run = 0; run < 3 && (await s.state()).charge?.status !== "paid"; run++) await reconcileOpenPayments(env);
    await expectCreditedOnce(s, late.transactionHash);
  });

  it("the watch of released payments cannot be starved: many released authorizations that stay unused do not hide a later one that is used", async () => {
    const x402 = settingsOf(env).x402!;
    // Expiring before the one that matters (its window is 300 s), so an order by expiry would read them first forever.
    const soon = Math.floor(Date.now() / 1000) + 120;
    const at = new Date().toISOString();
    // 55 released payments never used: one run reads 50.
    await env.DB.batch(
      Array.from({ length: 55 }, (_, i) =>
        env.DB.prepare(
          `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, value, valid_before, payload, status, error, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, 'chg_blocker', '10000', ?, '{}', 'failed', 'insufficient_funds', ?, ?)`,
        ).bind(
          `xpay_blocker${i}`,
          x402.network,
          x402.asset.toLowerCase(),
          privateKeyToAccount(generatePrivateKey()).address.toLowerCase(),
          `0x${crypto.randomUUID().replace(/-/g, "").padEnd(64, "0")}`,
          soon + i,
          at,
          at,
        ),
      ),
    );
    const s = await setUp();
    expect((await s.pay(withRemoteFacilitator(async () => settleReply("insufficient_funds")))).kind).toBe(
      "settle_failed",
    );
    const late = await submitAuthorization(s.payment.payload);
    for (let run = 0; run < 3 && (await s.state()).charge?.status !== "paid"; run++) await reconcileOpenPayments(env);
    await expectCreditedOnce(s, late.transactionHash);
    await env.DB.prepare("DELETE FROM x402_payments WHERE charge_id = 'chg_blocker'").run();
  });

  it("an authorization the payer cancelled while the outcome was unknown: released once reconciliation sees the cancellation", async () => {
    const s = await setUp();
    const outcome = await s.pay({
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "unknown", reason: "facilitator_timeout", transaction: null }),
    });
    expect(outcome.kind).toBe("pending");
    await cancelAuthorization(s.payer, s.payment.payload.authorization.nonce as Hex);
    await reconcileOpenPayments(env);
    expect(await s.state()).toMatchObject({
      payment: { status: "failed", error: "authorization_canceled" },
      charge: { status: "pending", claimed: 0 },
      merchantBalance: 0,
    });
    expect(await tokenBalance(s.payer.address)).toBe(10_000_000n);
    // Watched no more: the next runs leave it released and the charge unclaimed.
    await reconcileOpenPayments(env);
    expect(await s.state()).toMatchObject({ payment: { status: "failed" }, charge: { claimed: 0 } });
  });
});
