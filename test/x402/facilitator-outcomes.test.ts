import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { reconcileOpenPayments } from "../../src/x402/reconcile";
import { release } from "../../src/x402/settlement";
import { api } from "../helpers/api";
import { createAgent, payCharge } from "../helpers/factories";
import {
  broadcastingThen,
  CENTS,
  cancelAuthorization,
  cleanUp,
  expectCreditedOnce,
  settleReply,
  setUp,
  VALUE,
  withRemoteFacilitator,
} from "../helpers/settle-outcomes";
import { submitAuthorization, tokenBalance } from "../helpers/x402";

/*
 * What a facilitator reports about a settlement (test/x402/settle-outcomes.test.ts has the service's own
 * settler): a failure after the money may have moved is pending, and reconciliation decides from the
 * chain, crediting the transaction that used the authorization exactly once, or releasing one that can
 * never pay. Each test names its facilitator, so batched settlement (the built-in settler's) cannot
 * change what they answer: they run in the workers project only.
 */

afterEach(cleanUp);

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
