import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { setFaultHook } from "../../src/lib/faults";
import {
  OPEN_PAYMENT_SELECT,
  type OpenPayment,
  reconcileOpenPayments,
  reconcilePayment,
} from "../../src/x402/reconcile";
import { type ApiResponse, api } from "../helpers/api";
import { createCharge } from "../helpers/factories";
import { chain, freshPayer, type Payer, publicClient, refuseAtRelay, tokenBalance, xPaymentFor } from "../helpers/x402";
import { chargePaidRows, expectShardsAtRest, homeBalance, merchantOn } from "./helpers";

/*
 * Batched settlement (the workers-shards-batch project: two ledger shards, and
 * X402_SETTLEMENT_BATCH_ADDRESS naming the SettlementBatch contract) of charges of merchants on both
 * shards in one on-chain transaction. A batch is made as test/x402/batch.test.ts makes one: a lone
 * leader's send is held at the relay, and the payments arriving meanwhile go out together next.
 * Each payment's outcome is recorded in its own charge's shard, once, guarded by its status.
 */
const CENTS = 140;
const VALUE = BigInt(CENTS) * 10_000n;
const HOLD_MS = 2_500;

const shops: Record<number, { merchantId: string; apiKey: string }> = {};
beforeAll(async () => {
  expect(settingsOf(env).x402?.settlementBatch?.address.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
  expect(settingsOf(env).ledgerShards).toBe(2);
  shops[0] = await merchantOn(0, { name: "Batch shop 0" });
  shops[1] = await merchantOn(1, { name: "Batch shop 1" });
});
afterEach(() => setFaultHook(null));

const isSettled = (r: ApiResponse) => r.status === 200 && r.body?.settlement?.success === true;
const pay = (chargeId: string, header: string) =>
  api("GET", `/charges/${chargeId}/x402`, { headers: { "X-PAYMENT": header } });
const chargeOf = async (chargeId: string) => (await api("GET", `/charges/${chargeId}`)).body;

async function purchase(shard: number, payer: Payer) {
  const { chargeId } = await createCharge(shops[shard]!.apiKey, CENTS);
  expect(shardOfId(chargeId)).toBe(shard);
  const { header, payload } = await xPaymentFor(`/charges/${chargeId}/x402`, payer.key, VALUE);
  return { chargeId, header, payTo: payload.authorization.to as Hex, payer };
}
type Purchase = Awaited<ReturnType<typeof purchase>>;

/** A leader on shard 0 paid alone with its send held at the relay, and `purchases` paid meanwhile: they share the next batch. */
async function behindALeader(purchases: Purchase[]) {
  const leader = await purchase(0, await freshPayer(VALUE));
  await refuseAtRelay({
    containing: leader.payer.address,
    method: "eth_sendRawTransaction",
    times: 1,
    holdOnly: true,
    afterMs: HOLD_MS,
  });
  const first = pay(leader.chargeId, leader.header);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const rest = Promise.all(purchases.map((p) => pay(p.chargeId, p.header)));
  return { leader, first: await first, rest: await rest };
}

const paymentRow = (chargeId: string) =>
  dbOfShard(env, shardOfId(chargeId))
    .prepare("SELECT id, status, tx_hash AS txHash FROM x402_payments WHERE charge_id = ?")
    .bind(chargeId)
    .first<{ id: string; status: string; txHash: string | null }>();

const balances = async (): Promise<[number, number]> => [
  await homeBalance("merchant", shops[0]!.merchantId),
  await homeBalance("merchant", shops[1]!.merchantId),
];

describe("one batch settling charges of two shards", () => {
  it("payments of charges on shards 0 and 1 go out in one transaction: each recorded once, in its own shard", async () => {
    const purchases = await Promise.all([0, 1, 0, 1].map(async (shard) => purchase(shard, await freshPayer(VALUE))));
    const [before0, before1] = await balances();
    const { first, rest } = await behindALeader(purchases);
    expect(isSettled(first)).toBe(true);
    expect(rest.map(isSettled)).toEqual([true, true, true, true]);
    const hashes = new Set(rest.map((r) => r.body.settlement.transaction as Hex));
    expect(hashes.size).toBe(1);
    const [batchHash] = [...hashes];
    const tx = await publicClient().getTransaction({ hash: batchHash! });
    expect(tx.to?.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
    for (const p of purchases) {
      expect(await chargeOf(p.chargeId)).toMatchObject({ status: "paid", method: "x402", reference: batchHash });
      const row = await paymentRow(p.chargeId);
      expect(row).toMatchObject({ status: "settled", txHash: batchHash });
      expect(shardOfId(row!.id)).toBe(shardOfId(p.chargeId));
      expect(await chargePaidRows(p.chargeId)).toHaveLength(1);
      expect(await tokenBalance(p.payTo)).toBe(VALUE);
      expect(await tokenBalance(p.payer.address)).toBe(0n);
    }
    // The leader is shard 0's: three payments there, two on shard 1.
    expect(await balances()).toEqual([before0 + 3 * CENTS, before1 + 2 * CENTS]);
    await expectShardsAtRest();
  });

  it("a batch whose recording fails in every shard, then recorded in shard 0 and not yet in shard 1 (a crash between them): the cron over every shard records the rest, each once", async () => {
    const purchases = await Promise.all([0, 1].map(async (shard) => purchase(shard, await freshPayer(VALUE))));
    const [before0, before1] = await balances();
    // Every credit fails (the sequencers refuse their batches), after the transaction moved the money.
    let strikes = 0;
    setFaultHook((point) => {
      if (point !== "ledger.before_batch") return;
      strikes++;
      throw new Error("injected fault at ledger.before_batch");
    });
    const { first, rest } = await behindALeader(purchases);
    setFaultHook(null);
    expect(strikes).toBeGreaterThanOrEqual(3);
    for (const r of [first, ...rest]) expect(r.status, JSON.stringify(r.body)).toBe(202);
    const [zero, one] = [await paymentRow(purchases[0]!.chargeId), await paymentRow(purchases[1]!.chargeId)];
    expect(zero).toMatchObject({ status: "unknown" });
    expect(one).toMatchObject({ status: "unknown", txHash: zero!.txHash });
    for (const p of purchases) expect(await tokenBalance(p.payTo)).toBe(VALUE);
    expect(await balances()).toEqual([before0, before1]);

    // Recorded in shard 0 only (what a reconciler that died before reaching shard 1 leaves).
    const open = await dbOfShard(env, 0)
      .prepare(`${OPEN_PAYMENT_SELECT} WHERE id = ?`)
      .bind(zero!.id)
      .first<OpenPayment>();
    expect(await reconcilePayment(env, settingsOf(env).x402!, open!)).toBe("credited");
    expect(await paymentRow(purchases[0]!.chargeId)).toMatchObject({ status: "settled", txHash: zero!.txHash });
    expect(await paymentRow(purchases[1]!.chargeId)).toMatchObject({ status: "unknown" });
    expect(await chargeOf(purchases[1]!.chargeId)).toMatchObject({ status: "pending" });
    // The same outcome recorded again in shard 0 changes nothing (the payment is no longer open).
    expect(await reconcilePayment(env, settingsOf(env).x402!, open!)).toBe("credited");
    expect(await balances()).toEqual([before0 + CENTS, before1]);

    // The cron scans every shard: shard 1's payment and the leader's (shard 0) are recorded, once.
    const counts = await reconcileOpenPayments(env);
    expect(counts.credited).toBeGreaterThanOrEqual(2);
    await reconcileOpenPayments(env);
    for (const p of purchases) {
      expect(await paymentRow(p.chargeId)).toMatchObject({ status: "settled", txHash: zero!.txHash });
      expect(await chargeOf(p.chargeId)).toMatchObject({ status: "paid", reference: zero!.txHash });
      expect(await chargePaidRows(p.chargeId)).toHaveLength(1);
    }
    expect(await balances()).toEqual([before0 + 2 * CENTS, before1 + CENTS]);
    for (const id of [zero!.id, one!.id])
      expect((await api("GET", `/x402/settlements/${id}`)).body).toMatchObject({ status: "settled" });
    await expectShardsAtRest();
  });
});
