import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import {
  OPEN_PAYMENT_SELECT,
  type OpenPayment,
  reconcileOpenPayments,
  reconcilePayment,
} from "../../src/x402/reconcile";
import { type ApiResponse, api, consoleToken } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import {
  chain,
  freshPayer,
  holdNextSend,
  loseAnswerToSend,
  type Payer,
  publicClient,
  refuseAtRelay,
  tokenBalance,
  transfersFrom,
  xPaymentFor,
} from "../helpers/x402";

/*
 * Batched settlement (the workers-batch project: X402_SETTLEMENT_BATCH_ADDRESS names the
 * SettlementBatch contract). A lane sends a batch as soon as the one before it was answered by the
 * node, so these tests make a batch by holding the node's answer to a first, lone settlement (the
 * "leader") at the relay: the payments that arrive meanwhile go out together in the next
 * transaction. Payers are fresh keys funded for exactly what they pay, so every balance is exact.
 */
const CENTS = 120;
const VALUE = BigInt(CENTS) * 10_000n;
/** Long enough for every payment started meanwhile to be checked, reserved and queued behind the leader. */
const HOLD_MS = 2_500;

let merchant: { merchantId: string; apiKey: string };
beforeAll(async () => {
  expect(settingsOf(env).x402?.settlementBatch?.address.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
  merchant = await createMerchant({ name: "Batch Shop" });
});

const isSettled = (r: ApiResponse) => r.status === 200 && r.body?.settlement?.success === true;
const pay = (chargeId: string, header: string) =>
  api("GET", `/charges/${chargeId}/x402`, { headers: { "X-PAYMENT": header } });

/** A charge and a payment for it from `payer`. */
async function purchase(payer: Payer) {
  const { chargeId } = await createCharge(merchant.apiKey, CENTS);
  const { header, payload } = await xPaymentFor(`/charges/${chargeId}/x402`, payer.key, VALUE);
  return { chargeId, header, nonce: payload.authorization.nonce as Hex, payer };
}

type Purchase = Awaited<ReturnType<typeof purchase>>;

/**
 * Pays a leader alone, with the node's answer to its send held at the relay, and `purchases` while it
 * is held: they wait for the next batch. Answers the leader's response and theirs, in order.
 */
async function behindALeader(purchases: Purchase[]) {
  const leader = await purchase(await freshPayer(VALUE));
  await holdNextSend(leader.payer.address, HOLD_MS);
  const first = pay(leader.chargeId, leader.header);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const rest = Promise.all(purchases.map((p) => pay(p.chargeId, p.header)));
  return { leader, first: await first, rest: await rest };
}

const paymentRow = (chargeId: string) =>
  env.DB.prepare("SELECT id, status, error, tx_hash AS txHash FROM x402_payments WHERE charge_id = ?")
    .bind(chargeId)
    .first<{ id: string; status: string; error: string | null; txHash: string | null }>();

afterEach(() => setFaultHook(null));

/** The lane's object ends, as a crash would, the first time it reaches `point` with a batch in hand. */
function crashLaneAt(point: FaultPoint) {
  let crashed = false;
  setFaultHook((reached, context) => {
    if (reached !== point || crashed) return;
    crashed = true;
    context.abort?.();
    throw new Error(`injected crash at ${point}`);
  });
}

/** Reconciles one payment until `done` says so (another file's send may sit in the gas key's mempool a moment). */
async function reconcileUntil(paymentId: string, done: (verdict: string) => boolean) {
  for (let attempt = 0; ; attempt++) {
    const open = await env.DB.prepare(`${OPEN_PAYMENT_SELECT} WHERE id = ?`).bind(paymentId).first<OpenPayment>();
    const verdict = open ? await reconcilePayment(env, settingsOf(env).x402!, open) : "closed";
    if (done(verdict) || attempt === 50) return verdict;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const chargeOf = async (chargeId: string) => (await api("GET", `/charges/${chargeId}`)).body;

async function expectAuditOk() {
  const res = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(res.body.ok).toBe(true);
}

describe("batched x402 settlement", () => {
  it("ten payments that wait behind a send go out in one transaction through the contract: each settled and credited once, for less gas each than a lone transfer", async () => {
    const payers = await Promise.all(Array.from({ length: 5 }, () => freshPayer(2n * VALUE)));
    const purchases = await Promise.all(payers.flatMap((p) => [purchase(p), purchase(p)]));
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const startBlock = await publicClient().getBlockNumber();

    const { leader, first, rest } = await behindALeader(purchases);

    expect(isSettled(first)).toBe(true);
    expect(rest.map(isSettled)).toEqual(Array(10).fill(true));
    const [batchHash, ...others] = new Set(rest.map((r) => r.body.settlement.transaction as Hex));
    expect(others).toEqual([]);
    const lone = first.body.settlement.transaction as Hex;
    expect(batchHash).not.toBe(lone);
    const batchTx = await publicClient().getTransaction({ hash: batchHash! });
    expect(batchTx.to?.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
    const loneTx = await publicClient().getTransaction({ hash: lone });
    expect(loneTx.to?.toLowerCase()).toBe(chain().token.toLowerCase());
    // Gas per settlement: the batch shares one transaction's base cost among its ten.
    const [batchReceipt, loneReceipt] = await Promise.all([
      publicClient().getTransactionReceipt({ hash: batchHash! }),
      publicClient().getTransactionReceipt({ hash: lone }),
    ]);
    expect(batchReceipt.status).toBe("success");
    expect(batchReceipt.gasUsed / 10n).toBeLessThan(loneReceipt.gasUsed);
    // Every payer paid exactly what it signed, once, in that transaction.
    for (const p of payers) expect(await tokenBalance(p.address)).toBe(0n);
    const moved = await transfersFrom(
      payers.map((p) => p.address),
      startBlock,
    );
    expect(moved).toHaveLength(10);
    expect(new Set(moved.map((m) => m.transaction))).toEqual(new Set([batchHash]));
    // Each charge paid once, its reference the shared transaction; the merchant credited eleven times.
    for (const p of purchases) {
      expect(await chargeOf(p.chargeId)).toMatchObject({ status: "paid", method: "x402", reference: batchHash });
      expect(await paymentRow(p.chargeId)).toMatchObject({ status: "settled", txHash: batchHash });
    }
    expect((await chargeOf(leader.chargeId)).reference).toBe(lone);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 11 * CENTS);
    // A replay of a batched payment answers its settlement and settles nothing more.
    const replay = await pay(purchases[3]!.chargeId, purchases[3]!.header);
    expect(replay.status).toBe(200);
    expect(replay.body.settlement.transaction).toBe(batchHash);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 11 * CENTS);
    await expectAuditOk();
  });

  it("one call of a batch fails on its own (its payer's funds went to another call of the same batch): the rest settle, it is released and payable again", async () => {
    const short = await freshPayer(VALUE);
    const other = await freshPayer(VALUE);
    // Each of short's two authorizations passes its own checks (the balance covers either), not both.
    const purchases = [await purchase(short), await purchase(short), await purchase(other)];
    const merchantBefore = await merchantBalance(merchant.apiKey);

    const { rest } = await behindALeader(purchases);

    const [a, b, c] = rest;
    expect(isSettled(c!)).toBe(true);
    expect([a, b].filter((r) => isSettled(r!))).toHaveLength(1);
    const loserIndex = isSettled(a!) ? 1 : 0;
    const loser = rest[loserIndex]!;
    const winner = rest[1 - loserIndex]!;
    expect(winner.body.settlement.transaction).toBe(c!.body.settlement.transaction);
    expect(loser.status).toBe(402);
    expect(loser.body.error).toBe("Liquidación fallida");
    const row = await paymentRow(purchases[loserIndex]!.chargeId);
    expect(row?.status).toBe("failed");
    expect(row?.error).toBe("transaction_reverted: ERC20: transfer amount exceeds balance");
    expect(await chargeOf(purchases[loserIndex]!.chargeId)).toMatchObject({ status: "pending", reference: null });
    expect(await tokenBalance(short.address)).toBe(0n);
    expect(await tokenBalance(other.address)).toBe(0n);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 3 * CENTS);
    // Payable again, by someone with the funds.
    const again = await xPaymentFor(
      `/charges/${purchases[loserIndex]!.chargeId}/x402`,
      (await freshPayer(VALUE)).key,
      VALUE,
    );
    expect(isSettled(await pay(purchases[loserIndex]!.chargeId, again.header))).toBe(true);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 4 * CENTS);
    await expectAuditOk();
  });

  it("a batch the node took but whose answer was lost ('nonce too low' on the way back): found by its hash, each payment settled once, never sent twice", async () => {
    const payer = await freshPayer(3n * VALUE);
    const purchases = [await purchase(payer), await purchase(payer), await purchase(payer)];
    const startBlock = await publicClient().getBlockNumber();
    await loseAnswerToSend(payer.address);

    const { rest } = await behindALeader(purchases);

    expect(rest.map(isSettled)).toEqual([true, true, true]);
    const hashes = new Set(rest.map((r) => r.body.settlement.transaction));
    expect(hashes.size).toBe(1);
    const moved = await transfersFrom([payer.address], startBlock);
    expect(moved).toHaveLength(3);
    expect(new Set(moved.map((m) => m.transaction))).toEqual(hashes);
    expect(await tokenBalance(payer.address)).toBe(0n);
    for (const p of purchases) expect(await paymentRow(p.chargeId)).toMatchObject({ status: "settled" });
  });

  it("the lane crashes with a batch in hand, before sending it (settle.before_send): pending, nothing moved; released after five quiet minutes, and the same authorization then pays", async () => {
    const payer = await freshPayer(2n * VALUE);
    const p = await purchase(payer);
    crashLaneAt("settle.before_send");

    const answer = await pay(p.chargeId, p.header);

    expect(answer.status).toBe(202);
    const row = await paymentRow(p.chargeId);
    expect(row).toMatchObject({ status: "unknown", txHash: null });
    expect(row!.error).toMatch(/^settler_(unreachable|failed)/);
    expect(await tokenBalance(payer.address)).toBe(2n * VALUE);
    setFaultHook(null);
    // Not sent: once quiet for five minutes with the authorization unused, the charge is let go.
    await env.DB.prepare("UPDATE x402_payments SET updated_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 6 * 60_000).toISOString(), row!.id)
      .run();
    expect(await reconcileUntil(row!.id, (v) => v === "failed")).toBe("failed");
    expect(await paymentRow(p.chargeId)).toMatchObject({ status: "failed", error: "settlement_not_sent" });
    const again = await pay(p.chargeId, p.header);
    expect(isSettled(again)).toBe(true);
    expect(await tokenBalance(payer.address)).toBe(VALUE);
    expect(await chargeOf(p.chargeId)).toMatchObject({ status: "paid", reference: again.body.settlement.transaction });
  });

  it("the lane crashes right after sending a batch (settle.after_send): pending, then credited once from the chain, never sent twice", async () => {
    const payer = await freshPayer(VALUE);
    const p = await purchase(payer);
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const startBlock = await publicClient().getBlockNumber();
    crashLaneAt("settle.after_send");

    const answer = await pay(p.chargeId, p.header);

    expect(answer.status).toBe(202);
    expect(await paymentRow(p.chargeId)).toMatchObject({ status: "unknown" });
    setFaultHook(null);
    // The transfer left: reconciliation finds it by the payer and nonce and credits it.
    const row = await paymentRow(p.chargeId);
    expect(await reconcileUntil(row!.id, (v) => v === "credited" || v === "closed")).toBe("credited");
    await reconcileOpenPayments(env);
    const moved = await transfersFrom([payer.address], startBlock);
    expect(moved).toHaveLength(1);
    expect(await paymentRow(p.chargeId)).toMatchObject({ status: "settled", txHash: moved[0]!.transaction });
    expect(await chargeOf(p.chargeId)).toMatchObject({ status: "paid", reference: moved[0]!.transaction });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + CENTS);
    // The payer's retry answers the settlement and moves nothing more.
    const retry = await pay(p.chargeId, p.header);
    expect(retry.status).toBe(200);
    expect(await tokenBalance(payer.address)).toBe(0n);
    await expectAuditOk();
  });

  it("a batch the node refuses: every payment in it is pending (the node may have taken it), none moved, and the lane's next batch settles", async () => {
    const payer = await freshPayer(4n * VALUE);
    const purchases = [await purchase(payer), await purchase(payer), await purchase(payer)];
    await refuseAtRelay({ containing: payer.address, method: "eth_sendRawTransaction", times: 1 });

    const { rest } = await behindALeader(purchases);

    expect(rest.map((r) => r.status)).toEqual([202, 202, 202]);
    for (const r of rest) expect(r.headers.get("location")).toMatch(/^\/x402\/settlements\/xpay_/);
    for (const p of purchases) expect(await paymentRow(p.chargeId)).toMatchObject({ status: "unknown", txHash: null });
    expect(await tokenBalance(payer.address)).toBe(4n * VALUE);
    const later = await purchase(payer);
    expect(isSettled(await pay(later.chargeId, later.header))).toBe(true);
    expect(await tokenBalance(payer.address)).toBe(3n * VALUE);
  });
});
