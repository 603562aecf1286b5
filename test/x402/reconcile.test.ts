import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { type Hex, parseAbiItem } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { getCharge as readChargeRow } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { type Facilitator, remoteFacilitator } from "../../src/x402/facilitator";
import {
  OPEN_PAYMENT_SELECT,
  type OpenPayment,
  reconcileOpenPayments,
  reconcilePayment,
} from "../../src/x402/reconcile";
import { payWithX402 } from "../../src/x402/service";
import { settlerOf } from "../../src/x402/settler.do";
import { api, BASE, consoleToken } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { chain, publicClient, TOKEN_ABI, tokenBalance, xPaymentFor } from "../helpers/x402";

/*
 * Settlements whose outcome was lost, reconciled against the real chain.
 * Payer: account 7, used by no other test file. The remote facilitator is the
 * test double of the global set-up: its /settle broadcasts the transfer (gas
 * from account 9) and never answers, so the service's call times out after
 * X402_FACILITATOR_TIMEOUT_MS (3 s in tests).
 */
const PAYER = 7;
const AUTHORIZATION_USED = parseAbiItem("event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)");

const payer = () => chain().accounts[PAYER]!.address;
const x402Path = (chargeId: string) => `/charges/${chargeId}/x402`;
const authorizationUsed = (nonce: Hex) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [payer(), nonce],
  });

async function chargeTarget(chargeId: string) {
  const row = await readChargeRow(env.DB, chargeId);
  expect(row).toBeTruthy();
  return { kind: "charge" as const, charge: row! };
}

async function paymentRow(chargeId: string) {
  return env.DB.prepare(
    "SELECT id, status, tx_hash AS txHash, valid_before AS validBefore FROM x402_payments WHERE charge_id = ?",
  )
    .bind(chargeId)
    .all<{ id: string; status: string; txHash: string | null; validBefore: number }>();
}

async function until<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms (last: ${String(value)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let merchant: { merchantId: string; apiKey: string };
beforeAll(async () => {
  merchant = await createMerchant({ name: "Patient Shop" });
});

describe("reconciliation of x402 settlements with unknown outcomes", () => {
  it("a facilitator that times out after broadcasting: pending, never a fresh 402, then credited exactly once by reconciliation", async () => {
    const cents = 320;
    const value = BigInt(cents) * 10_000n;
    const x = settingsOf(env).x402!;
    expect(x.facilitatorTimeoutMs).toBe(3000);
    const charge = await createCharge(merchant.apiKey, cents, { description: "lost settlement" });
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const payerBefore = await tokenBalance(payer());
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), PAYER, value);
    const nonce = payload.authorization.nonce;

    const outcome = await payWithX402(
      env,
      await chargeTarget(charge.chargeId),
      `${BASE}${x402Path(charge.chargeId)}`,
      header,
      remoteFacilitator(x, chain().facilitatorUrl),
    );
    expect(outcome.kind).toBe("pending");
    if (outcome.kind !== "pending") throw new Error("unreachable");
    expect(outcome.chargeId).toBe(charge.chargeId);

    // The transfer happened on chain, but the service does not know it yet.
    await until(
      "authorization used on chain",
      () => authorizationUsed(nonce),
      (used) => used === true,
    );
    expect(await tokenBalance(payer())).toBe(payerBefore - value);
    const logs = await publicClient().getLogs({
      address: chain().token,
      event: AUTHORIZATION_USED,
      args: { authorizer: payer(), nonce },
      fromBlock: 0n,
      toBlock: "latest",
    });
    expect(logs).toHaveLength(1);
    const transaction = logs[0]!.transactionHash;
    expect((await publicClient().getTransactionReceipt({ hash: transaction })).status).toBe("success");

    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({
      status: "pending",
      method: null,
      reference: null,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore);
    expect((await paymentRow(charge.chargeId)).results.map((r) => r.status)).toEqual(["unknown"]);

    // The client retries with the same payment: 202 pending, never a fresh 402.
    const retry = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(retry.status).toBe(202);
    expect(retry.body).toMatchObject({ chargeId: charge.chargeId, status: "pending" });
    expect(retry.body.accepts).toBeUndefined();
    // The 202 names where to ask instead of paying again; the settlement is pending there.
    const location = retry.headers.get("location");
    expect(location).toBe(`/x402/settlements/${outcome.settlementId}`);
    expect(retry.body.settlement.settlementId).toBe(outcome.settlementId);
    expect((await api("GET", location!)).body).toMatchObject({
      settlementId: outcome.settlementId,
      status: "pending",
      chargeId: charge.chargeId,
      errorReason: null,
    });
    // Another payment cannot pay the claimed charge meanwhile, and moves nothing.
    const other = await xPaymentFor(x402Path(charge.chargeId), PAYER, value);
    const balanceMid = await tokenBalance(payer());
    const competing = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": other.header } });
    expect(competing.status === 200 && competing.body.settlement?.success === true).toBe(false);
    expect(await tokenBalance(payer())).toBe(balanceMid);
    expect(await authorizationUsed(other.payload.authorization.nonce)).toBe(false);

    // Reconciliation finds the transfer on chain and credits it.
    const first = await reconcileOpenPayments(env);
    expect(first.credited).toBeGreaterThanOrEqual(1);
    const paid = (await api("GET", `/charges/${charge.chargeId}`)).body;
    expect(paid).toMatchObject({ status: "paid", method: "x402", reference: transaction });
    expect(paid.paidAt).toBeTruthy();
    expect((await api("GET", location!)).body).toMatchObject({ status: "settled", transaction });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    expect((await paymentRow(charge.chargeId)).results).toEqual([
      expect.objectContaining({ status: "settled", txHash: transaction }),
    ]);
    const audit = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM audit_events WHERE type = 'charge.paid' AND reference = ?",
    )
      .bind(transaction)
      .first<{ n: number }>();
    expect(audit?.n).toBe(1);

    // Again: nothing more is credited.
    const second = await reconcileOpenPayments(env);
    expect(second.credited).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    const postings = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM ledger_entries WHERE account = ? AND transfer_id = ?",
    )
      .bind(`merchant:${merchant.merchantId}`, transaction)
      .first<{ n: number }>();
    expect(postings?.n).toBe(1);
    expect(await tokenBalance(payer())).toBe(payerBefore - value);

    // Now the charge answers as paid, with or without the payment.
    const after = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(after.status).toBe(200);
    expect(after.body.settlement?.transaction ?? after.body.reference).toBe(transaction);
    const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
    expect(verify.body.ok).toBe(true);
  });

  it("the settler's alarm reconciles an unknown outcome without the cron, and firing twice credits once", async () => {
    const cents = 140;
    const value = BigInt(cents) * 10_000n;
    const x = settingsOf(env).x402!;
    const charge = await createCharge(merchant.apiKey, cents, { description: "alarm reconciled" });
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), PAYER, value);
    const outcome = await payWithX402(
      env,
      await chargeTarget(charge.chargeId),
      `${BASE}${x402Path(charge.chargeId)}`,
      header,
      remoteFacilitator(x, chain().facilitatorUrl),
    );
    expect(outcome.kind).toBe("pending");
    const [payment] = (await paymentRow(charge.chargeId)).results;
    expect(payment?.status).toBe("unknown");

    // The unknown outcome is watched by the settler object, with an alarm set.
    const settler = settlerOf(env);
    const watched = await runInDurableObject(settler, async (_instance, state) => ({
      alarm: await state.storage.getAlarm(),
      keys: [...(await state.storage.list({ prefix: "pending:" })).keys()],
    }));
    expect(watched.alarm).not.toBeNull();
    expect(watched.keys).toContain(`pending:${payment!.id}`);

    await until(
      "authorization used on chain",
      () => authorizationUsed(payload.authorization.nonce),
      (used) => used === true,
    );
    expect(await runDurableObjectAlarm(settler)).toBe(true);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({ status: "paid", method: "x402" });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    const after = await runInDurableObject(settler, async (_instance, state) => [
      ...(await state.storage.list({ prefix: "pending:" })).keys(),
    ]);
    expect(after).not.toContain(`pending:${payment!.id}`);

    // The same alarm again (a platform retry, or the payment watched twice): nothing more moves.
    await settler.watch(payment!.id, Date.now() + 60_000);
    expect(await runDurableObjectAlarm(settler)).toBe(true);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    const audit = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM audit_events WHERE type = 'charge.paid' AND charge_id = ?",
    )
      .bind(charge.chargeId)
      .first<{ n: number }>();
    expect(audit?.n).toBe(1);
    // And the cron, behind it, finds nothing of this payment left to do.
    await reconcileOpenPayments(env);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
  });

  it("a payment never sent (the Worker died before its broadcast): released after five quiet minutes with nothing of the gas keys waiting on chain, then payable with the same authorization", async () => {
    const cents = 135;
    const value = BigInt(cents) * 10_000n;
    const charge = await createCharge(merchant.apiKey, cents);
    const payerBefore = await tokenBalance(payer());
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), PAYER, value);
    // A settlement that never reached the chain: no transaction, the outcome unknown to the service.
    const lost: Facilitator = {
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "unknown", reason: "broadcast_error: worker gone", transaction: null }),
    };
    const target = await chargeTarget(charge.chargeId);
    expect((await payWithX402(env, target, `${BASE}${x402Path(charge.chargeId)}`, header, lost)).kind).toBe("pending");
    const [row] = (await paymentRow(charge.chargeId)).results;
    const open = async () =>
      (await env.DB.prepare(`${OPEN_PAYMENT_SELECT} WHERE id = ?`).bind(row!.id).first<OpenPayment>())!;

    // Just now: the send may still be on its way.
    expect(await reconcilePayment(env, settingsOf(env).x402!, await open())).toBe("waiting");
    // Quiet for six minutes, the authorization unused: with a remote facilitator it may be in flight
    // anywhere, so that waits for expiry; the built-in facilitator's own keys show nothing waiting.
    await env.DB.prepare("UPDATE x402_payments SET updated_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 6 * 60_000).toISOString(), row!.id)
      .run();
    const remote = { ...settingsOf(env).x402!, facilitatorUrl: "https://facilitator.example/" };
    expect(await reconcilePayment(env, remote, await open())).toBe("waiting");
    // Another test file's settlement may be in the gas key's mempool at this instant: then it waits, and is asked again.
    await until(
      "released",
      async () => reconcilePayment(env, settingsOf(env).x402!, await open()),
      (verdict) => verdict === "failed",
    );
    const released = await env.DB.prepare("SELECT status, error FROM x402_payments WHERE id = ?").bind(row!.id).first();
    expect(released).toEqual({ status: "failed", error: "settlement_not_sent" });
    const chargeRow = await env.DB.prepare("SELECT status, x402_claim AS claim FROM charges WHERE id = ?")
      .bind(charge.chargeId)
      .first();
    expect(chargeRow).toEqual({ status: "pending", claim: null });
    expect(await authorizationUsed(payload.authorization.nonce)).toBe(false);
    // The settlement reads failed, with a protocol code; the payer's same authorization now settles it.
    const settlement = await api("GET", `/x402/settlements/${row!.id}`);
    expect(settlement.body).toMatchObject({ status: "failed", errorReason: "unexpected_settle_error" });
    const paid = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    expect(paid.body.settlement.settlementId).toBe(row!.id);
    expect(await tokenBalance(payer())).toBe(payerBefore - value);
  });

  it("an unknown payment whose authorization was never used and has expired is released; the charge is payable again", async () => {
    const cents = 145;
    const value = BigInt(cents) * 10_000n;
    const charge = await createCharge(merchant.apiKey, cents);
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const payerBefore = await tokenBalance(payer());
    const { header, payload } = await xPaymentFor(x402Path(charge.chargeId), PAYER, value);
    // A facilitator that loses the outcome without ever broadcasting.
    const silent: Facilitator = {
      verify: async () => ({ isValid: true }),
      settle: async () => ({ kind: "unknown", reason: "x", transaction: null }),
    };

    const outcome = await payWithX402(
      env,
      await chargeTarget(charge.chargeId),
      `${BASE}${x402Path(charge.chargeId)}`,
      header,
      silent,
    );
    expect(outcome.kind).toBe("pending");
    const [row] = (await paymentRow(charge.chargeId)).results;
    expect(row).toMatchObject({ status: "unknown", txHash: null });
    const claimed = await env.DB.prepare("SELECT status, x402_claim AS claim FROM charges WHERE id = ?")
      .bind(charge.chargeId)
      .first<{ status: string; claim: string | null }>();
    expect(claimed).toEqual({ status: "pending", claim: row!.id });

    // Still within its window and unused: reconciliation waits, nothing changes.
    const waiting = await reconcileOpenPayments(env);
    expect(waiting.waiting).toBeGreaterThanOrEqual(1);
    expect((await paymentRow(charge.chargeId)).results[0]!.status).toBe("unknown");
    expect((await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } })).status).toBe(202);

    // Past its validBefore, but recorded for another token than the configured one: it looks unused
    // here only because it was not asked on its own token, so reconciliation leaves it alone.
    const asset = await env.DB.prepare("SELECT asset FROM x402_payments WHERE id = ?")
      .bind(row!.id)
      .first<string>("asset");
    await env.DB.prepare("UPDATE x402_payments SET valid_before = 1, asset = ? WHERE id = ?")
      .bind("0x000000000000000000000000000000000000dead", row!.id)
      .run();
    await reconcileOpenPayments(env);
    expect((await paymentRow(charge.chargeId)).results[0]!.status).toBe("unknown");
    await env.DB.prepare("UPDATE x402_payments SET asset = ? WHERE id = ?").bind(asset, row!.id).run();

    // Past its validBefore and never used: nothing can move any more, so the claim is released.
    const released = await reconcileOpenPayments(env);
    expect(released.failed).toBeGreaterThanOrEqual(1);
    expect((await paymentRow(charge.chargeId)).results[0]!.status).toBe("failed");
    const open = await env.DB.prepare("SELECT status, x402_claim AS claim FROM charges WHERE id = ?")
      .bind(charge.chargeId)
      .first();
    expect(open).toEqual({ status: "pending", claim: null });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore);
    expect(await tokenBalance(payer())).toBe(payerBefore);
    expect(await authorizationUsed(payload.authorization.nonce)).toBe(false);

    // Payable again: terms without a payment, and the (never used) authorization settles it now.
    expect((await api("GET", x402Path(charge.chargeId))).status).toBe(402);
    const paid = await api("GET", x402Path(charge.chargeId), { headers: { "X-PAYMENT": header } });
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ chargeId: charge.chargeId, status: "paid", settlement: { success: true } });
    expect(await tokenBalance(payer())).toBe(payerBefore - value);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({
      status: "paid",
      method: "x402",
      reference: paid.body.settlement.transaction,
    });
    const again = await reconcileOpenPayments(env);
    expect(again.credited).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
  });
});
