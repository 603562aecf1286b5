import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { nextAttemptAfter, recoverTransfers } from "../../src/ledger/transfer-recovery";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import { api } from "../helpers/api";
import { dispatchDirectly } from "../helpers/direct";
import { createCharge, payCharge } from "../helpers/factories";
import { type FaultMode, injectOnce } from "../helpers/faults";
import { refund, refundsOf } from "../helpers/money-out";
import {
  agentOn,
  entrySum,
  expectShardsAtRest,
  homeBalance,
  inFlight,
  merchantOn,
  type Recovery,
  recoverBy,
  TRANSFER_FAULTS,
} from "./helpers";

// Hundreds of requests: each goes straight into the fetch handler (test/helpers/direct.ts says why).
dispatchDirectly();

/*
 * Refunds of wallet payments with two ledger shards. Everything of a refund lives in the charge's
 * shard (the merchant's home): the refund row and its id, the merchant's debit, the charge's
 * refunded sum. An agent in the same shard is credited in that batch; an agent in the other shard
 * through a transfer (kind `refund`): P1 on the merchant's shard, the arrival on the agent's, P3
 * back on the merchant's, with the wallet's alarm and the recovery cron finishing what a crash stops.
 */

afterEach(() => setFaultHook(null));

const row = async <T>(shard: number, sql: string, ...params: unknown[]) =>
  (await dbOfShard(env, shard)
    .prepare(sql)
    .bind(...params)
    .first<T>()) ?? null;

const count = async (shard: number, sql: string, ...params: unknown[]) =>
  (await row<{ n: number }>(shard, sql, ...params))!.n;

/** A merchant on `m`, an agent on `a` credited `credit`, and a charge of `cents` the agent paid (across shards when m ≠ a). */
async function paidAcross(m: number, a: number, cents: number, credit = cents) {
  const merchant = await merchantOn(m);
  const agent = await agentOn(a, { credit });
  const charge = await createCharge(merchant.apiKey, cents);
  expect(shardOfId(charge.chargeId)).toBe(m);
  const paid = await payCharge(agent.apiKey, charge.chargeId);
  expect(paid.status, paid.text).toBe(200);
  return { merchant, agent, chargeId: charge.chargeId as string };
}

/** Where a refund is recorded: its row, its transfer (if any), its arrival and its audit rows on each shard. */
async function refundRecords(refundId: string, m: number, a: number) {
  return {
    rowsOnMerchant: await count(m, "SELECT COUNT(*) AS n FROM refunds WHERE id = ?", refundId),
    rowsElsewhere: m === a ? 0 : await count(a, "SELECT COUNT(*) AS n FROM refunds WHERE id = ?", refundId),
    transfer: await row<{ kind: string; status: string; toShard: number }>(
      m,
      "SELECT kind, status, to_shard AS toShard FROM ledger_transfers WHERE id = ?",
      refundId,
    ),
    arrival: await row<{ outcome: string; fromShard: number }>(
      a,
      "SELECT outcome, from_shard AS fromShard FROM ledger_arrivals WHERE id = ?",
      refundId,
    ),
    refundedAudit: await count(
      m,
      "SELECT COUNT(*) AS n FROM audit_events WHERE type = 'charge.refunded' AND reference = ?",
      refundId,
    ),
    receivedAudit: await count(
      a,
      "SELECT COUNT(*) AS n FROM audit_events WHERE type = 'transfer.received' AND reference = ?",
      refundId,
    ),
  };
}

describe("wallet refunds with two shards", () => {
  for (const shard of [0, 1]) {
    it(`merchant and agent both in shard ${shard}: one batch there, as with one shard`, async () => {
      const { merchant, agent, chargeId } = await paidAcross(shard, shard, 1_000, 1_500);
      const res = await refund(merchant.apiKey, chargeId, { amountUsdCents: 300 });
      expect(res.status, res.text).toBe(201);
      expect(res.body.refund).toMatchObject({ chargeId, amountMinor: 300, method: "ledger", status: "succeeded" });
      expect(res.body.charge).toMatchObject({ chargeId, status: "paid", refundedMinor: 300 });
      const refundId = res.body.refund.refundId as string;
      expect(shardOfId(refundId)).toBe(shard);
      expect(refundId).toMatch(shard === 0 ? /^re_[0-9a-z]{24}$/ : /^re_s1_/);

      expect(await homeBalance("agent", agent.agentId)).toBe(800);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(700);
      const records = await refundRecords(refundId, shard, shard);
      expect(records).toMatchObject({ rowsOnMerchant: 1, transfer: null, arrival: null, refundedAudit: 1 });
      expect(await count(1 - shard, "SELECT COUNT(*) AS n FROM refunds WHERE id = ?", refundId)).toBe(0);
      expect((await refundsOf(merchant.apiKey, chargeId)).map((r) => r.refundId)).toEqual([refundId]);
      await expectShardsAtRest();
    });
  }

  for (const [m, a] of [
    [0, 1],
    [1, 0],
  ] as const) {
    it(`merchant in ${m}, agent in ${a}: the refund on the merchant's shard, the money home to the agent's`, async () => {
      const { merchant, agent, chargeId } = await paidAcross(m, a, 1_000, 1_500);
      expect(await homeBalance("agent", agent.agentId)).toBe(500);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(1_000);

      const key = `refund-across-${m}-${a}-${crypto.randomUUID()}`;
      const res = await refund(merchant.apiKey, chargeId, { amountUsdCents: 300 }, { "idempotency-key": key });
      expect(res.status, res.text).toBe(201);
      expect(res.body.refund).toMatchObject({ chargeId, amountMinor: 300, method: "ledger", status: "succeeded" });
      expect(res.body.charge).toMatchObject({ chargeId, refundedMinor: 300 });
      const refundId = res.body.refund.refundId as string;
      expect(shardOfId(refundId)).toBe(m);

      expect(await homeBalance("agent", agent.agentId)).toBe(800);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(700);
      expect(await refundRecords(refundId, m, a)).toEqual({
        rowsOnMerchant: 1,
        rowsElsewhere: 0,
        transfer: { kind: "refund", status: "completed", toShard: a },
        arrival: { outcome: "applied", fromShard: m },
        refundedAudit: 1,
        receivedAudit: 1,
      });
      // The merchant's outbox carries the refund's event, with the charge's sum after it.
      const event = await row<{ data: string }>(
        m,
        "SELECT data FROM outbox_events WHERE type = 'charge.refunded' AND json_extract(data, '$.refundId') = ?",
        refundId,
      );
      expect(JSON.parse(event!.data)).toMatchObject({ refundId, chargeId, amountMinor: 300, refundedMinor: 300 });

      // Its receipt is read in the merchant's shard, where its charge.refunded row is.
      const receipt = await api("GET", `/merchant/refunds/${refundId}/receipt`, { token: merchant.apiKey });
      expect(receipt.status, receipt.text).toBe(200);

      // The key answers the same bytes, and refunds nothing twice.
      const again = await refund(merchant.apiKey, chargeId, { amountUsdCents: 300 }, { "idempotency-key": key });
      expect(again.status).toBe(201);
      expect(again.text).toBe(res.text);

      // What remains, without an amount; then nothing remains.
      const rest = await refund(merchant.apiKey, chargeId);
      expect(rest.status, rest.text).toBe(201);
      expect(rest.body.charge.refundedMinor).toBe(1_000);
      const over = await refund(merchant.apiKey, chargeId, { amountUsdCents: 1 });
      expect(over.status).toBe(409);
      expect(over.body.error).toBe("refund_exceeds_remaining");
      expect(await homeBalance("agent", agent.agentId)).toBe(1_500);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(0);
      expect((await refundsOf(merchant.apiKey, chargeId)).map((r) => r.refundId)).toEqual([
        refundId,
        rest.body.refund.refundId,
      ]);
      await expectShardsAtRest();
    });
  }

  it("refuses another shard's merchant's charge (404) and an unpaid one (409), moving nothing", async () => {
    const { chargeId } = await paidAcross(1, 0, 600);
    const stranger = await merchantOn(0);
    const theirs = await refund(stranger.apiKey, chargeId, { amountUsdCents: 100 });
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toBe("charge_not_found");
    expect((await api("GET", `/merchant/charges/${chargeId}/refunds`, { token: stranger.apiKey })).status).toBe(404);
    const owner = await merchantOn(1);
    const pending = await createCharge(owner.apiKey, 100);
    const unpaid = await refund(owner.apiKey, pending.chargeId, { amountUsdCents: 100 });
    expect(unpaid.status).toBe(409);
    expect(unpaid.body.error).toBe("charge_not_paid");
    await expectShardsAtRest();
  });

  it("concurrent refunds of one charge across shards never take more than the charge", async () => {
    const { merchant, agent, chargeId } = await paidAcross(0, 1, 1_000);
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => refund(merchant.apiKey, chargeId, { amountUsdCents: 300 })),
    );
    const ok = answers.filter((r) => r.status === 201);
    expect(ok).toHaveLength(3);
    for (const r of answers.filter((r) => r.status !== 201)) {
      expect(r.status).toBe(409);
      expect(["refund_exceeds_remaining", "saldo_insuficiente"]).toContain(r.body.error);
    }
    const charge = await row<{ refunded: number }>(
      0,
      "SELECT refunded_minor AS refunded FROM charges WHERE id = ?",
      chargeId,
    );
    expect(charge!.refunded).toBe(900);
    expect(await homeBalance("agent", agent.agentId)).toBe(900);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(100);
    expect(await count(0, "SELECT COUNT(*) AS n FROM refunds WHERE charge_id = ?", chargeId)).toBe(3);
    await expectShardsAtRest();
  });

  it("concurrent refunds from both directions at once keep every shard's sums at zero", async () => {
    const one = await paidAcross(0, 1, 500);
    const two = await paidAcross(1, 0, 700);
    const answers = await Promise.all([
      refund(one.merchant.apiKey, one.chargeId, { amountUsdCents: 200 }),
      refund(two.merchant.apiKey, two.chargeId, { amountUsdCents: 300 }),
      refund(one.merchant.apiKey, one.chargeId, { amountUsdCents: 300 }),
      refund(two.merchant.apiKey, two.chargeId, { amountUsdCents: 400 }),
    ]);
    expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(await homeBalance("agent", one.agent.agentId)).toBe(500);
    expect(await homeBalance("agent", two.agent.agentId)).toBe(700);
    expect(await entrySum(0)).toBe(0);
    expect(await entrySum(1)).toBe(0);
    await expectShardsAtRest();
  });
});

const FAULTS = TRANSFER_FAULTS;

describe("faults in a refund across shards", () => {
  for (const [point, mode] of FAULTS) {
    for (const how of ["alarm", "cron"] as Recovery[]) {
      const [m, a] = how === "alarm" ? [0, 1] : [1, 0];
      it(`${point} (${mode}), merchant in ${m} → agent in ${a}, recovered by the ${how}`, async () => {
        const { merchant, agent, chargeId } = await paidAcross(m, a, 1_000);
        expect(await homeBalance("agent", agent.agentId)).toBe(0);
        const key = `refund-fault-${point}-${mode}-${how}-${crypto.randomUUID()}`;
        const fired = injectOnce(point, mode);
        const first = await refund(merchant.apiKey, chargeId, { amountUsdCents: 400 }, { "idempotency-key": key });
        expect(fired()).toBe(true);
        setFaultHook(null);
        expect([201, 500]).toContain(first.status);
        // Whatever happened, money is never created: in flight is the refund or nothing.
        expect([0, 400]).toContain(await inFlight());

        await recoverBy(how, agent.agentId);
        const retry = await refund(merchant.apiKey, chargeId, { amountUsdCents: 400 }, { "idempotency-key": key });
        expect(retry.status, retry.text).toBe(201);
        if (first.status === 201) expect(retry.text).toBe(first.text);
        // Recovery again (a refund the retry made anew is finished inline; the cron finds nothing left).
        await recoverTransfers(env, Date.now() + 3_600_000);

        const refunds = await refundsOf(merchant.apiKey, chargeId);
        expect(refunds).toHaveLength(1);
        expect(refunds[0]!.refundId).toBe(retry.body.refund.refundId);
        expect(await homeBalance("agent", agent.agentId)).toBe(400);
        expect(await homeBalance("merchant", merchant.merchantId)).toBe(600);
        expect(await refundRecords(retry.body.refund.refundId, m, a)).toMatchObject({
          rowsOnMerchant: 1,
          transfer: { kind: "refund", status: "completed" },
          arrival: { outcome: "applied" },
          refundedAudit: 1,
          receivedAudit: 1,
        });
        await expectShardsAtRest();
      });
    }
  }
});

/** Strikes at `point` the `nth` time it is reached (counting from now): a refund's ledger batches are P1, P2 (arrival), P3. */
function injectAtNth(point: FaultPoint, nth: number, mode: FaultMode): () => boolean {
  let seen = 0;
  let fired = false;
  setFaultHook((at, context) => {
    if (fired || at !== point || ++seen < nth) return;
    fired = true;
    if (mode === "abort" && context.abort) context.abort();
    throw new Error(`injected fault at ${point} #${nth}`);
  });
  return () => fired;
}

const LATER_PHASES: [FaultPoint, 2 | 3, FaultMode, Recovery][] = [
  ["ledger.before_batch", 2, "throw", "alarm"],
  ["ledger.before_batch", 2, "abort", "cron"],
  ["ledger.after_batch", 2, "throw", "cron"],
  ["ledger.after_batch", 2, "abort", "alarm"],
  ["ledger.before_batch", 3, "throw", "cron"],
  ["ledger.before_batch", 3, "abort", "alarm"],
  ["ledger.after_batch", 3, "throw", "alarm"],
  ["ledger.after_batch", 3, "abort", "cron"],
];

describe("faults in the arrival (P2) and completion (P3) of a refund across shards", () => {
  for (const [point, nth, mode, how] of LATER_PHASES) {
    const [m, a] = how === "alarm" ? [0, 1] : [1, 0];
    const phase = nth === 2 ? "P2" : "P3";
    it(`${point} of ${phase} (${mode}), merchant in ${m} → agent in ${a}, recovered by the ${how}`, async () => {
      const { merchant, agent, chargeId } = await paidAcross(m, a, 1_000);
      const key = `refund-late-fault-${phase}-${point}-${mode}-${crypto.randomUUID()}`;
      const fired = injectAtNth(point, nth, mode);
      const first = await refund(merchant.apiKey, chargeId, { amountUsdCents: 400 }, { "idempotency-key": key });
      expect(fired()).toBe(true);
      setFaultHook(null);
      expect([201, 500]).toContain(first.status);
      // The fault struck where it was aimed: P1 landed (the refund on the merchant's shard, its transfer);
      // before P2's batch nothing arrived and the transfer is pending; before P3's it arrived and is still pending.
      const [made] = await refundsOf(merchant.apiKey, chargeId);
      expect(made).toBeDefined();
      const at = await refundRecords(made!.refundId, m, a);
      expect(at.rowsOnMerchant).toBe(1);
      expect(at.transfer).toMatchObject({ kind: "refund", toShard: a });
      if (nth === 2 && point === "ledger.before_batch") {
        expect(at.arrival).toBeNull();
        expect(at.transfer!.status).toBe("pending");
      } else expect(at.arrival).toMatchObject({ outcome: "applied", fromShard: m });
      if (nth === 3 && point === "ledger.before_batch") expect(at.transfer!.status).toBe("pending");
      expect([0, 400]).toContain(await inFlight());

      await recoverBy(how, agent.agentId);
      const retry = await refund(merchant.apiKey, chargeId, { amountUsdCents: 400 }, { "idempotency-key": key });
      expect(retry.status, retry.text).toBe(201);
      if (first.status === 201) expect(retry.text).toBe(first.text);
      await recoverTransfers(env, Date.now() + 3_600_000);

      const refunds = await refundsOf(merchant.apiKey, chargeId);
      expect(refunds).toHaveLength(1);
      expect(refunds[0]!.refundId).toBe(made!.refundId);
      expect(await homeBalance("agent", agent.agentId)).toBe(400);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(600);
      expect(await refundRecords(made!.refundId, m, a)).toMatchObject({
        rowsOnMerchant: 1,
        transfer: { kind: "refund", status: "completed" },
        arrival: { outcome: "applied" },
        refundedAudit: 1,
        receivedAudit: 1,
      });
      await expectShardsAtRest();
    });
  }
});

describe("the recovery cron", () => {
  it("drives healthy transfers beside one whose arrival keeps failing, backs that one off, and finishes it later", async () => {
    // Three refunds from shard 1 to agents on shard 0, each left pending after P1 (the send's answer lost).
    const charges = [await paidAcross(1, 0, 500), await paidAcross(1, 0, 300), await paidAcross(1, 0, 200)];
    setFaultHook((at) => {
      if (at === "transfer.after_send") throw new Error("injected: the send's answer is lost");
    });
    const refunded = async (paid: (typeof charges)[number], cents: number) => {
      const res = await refund(paid.merchant.apiKey, paid.chargeId, { amountUsdCents: cents });
      expect([201, 500]).toContain(res.status);
      const [one] = await refundsOf(paid.merchant.apiKey, paid.chargeId);
      return { ...paid, cents, refundId: one!.refundId as string };
    };
    const stuck = await refunded(charges[0]!, 500);
    const healthy = [await refunded(charges[1]!, 300), await refunded(charges[2]!, 200)];
    setFaultHook(null);
    const all = [stuck, ...healthy];
    const statusOf = (r: { refundId: string }) =>
      row<{ status: string; attempts: number; next: string }>(
        1,
        "SELECT status, attempts, next_attempt_at AS next FROM ledger_transfers WHERE id = ?",
        r.refundId,
      );
    for (const r of all) {
      expect(await statusOf(r)).toMatchObject({ status: "pending", attempts: 0 });
      expect(await homeBalance("agent", r.agent.agentId)).toBe(0);
    }
    expect(await inFlight()).toBe(1_000);

    // The stuck agent's shard refuses its arrival (a fault to repair): every batch crediting it fails.
    const trigger = `test_stuck_${crypto.randomUUID().replaceAll("-", "")}`;
    await env.DB.prepare(
      `CREATE TRIGGER ${trigger} BEFORE INSERT ON ledger_entries WHEN NEW.account = 'agent:${stuck.agent.agentId}'
       BEGIN SELECT RAISE(ABORT, 'injected: the agent''s shard refuses'); END`,
    ).run();
    try {
      // Not due yet: the cron leaves fresh transfers to their drivers, and drives none of them.
      expect(await recoverTransfers(env)).toBe(0);
      for (const r of all) {
        expect(await statusOf(r)).toMatchObject({ status: "pending", attempts: 0 });
        expect(await homeBalance("agent", r.agent.agentId)).toBe(0);
      }

      // Due: one pass drives all three; the healthy ones complete beside the stuck one.
      const now = Date.now() + 120_000;
      expect(await recoverTransfers(env, now)).toBeGreaterThanOrEqual(3);
      for (const r of healthy) {
        expect(await statusOf(r)).toMatchObject({ status: "completed", attempts: 1 });
        expect(await homeBalance("agent", r.agent.agentId)).toBe(r.cents);
        expect((await refundsOf(r.merchant.apiKey, r.chargeId))[0]).toMatchObject({ status: "succeeded" });
      }
      // The stuck one was tried once and backed off.
      expect(await statusOf(stuck)).toEqual({ status: "pending", attempts: 1, next: nextAttemptAfter(1, now) });
      expect(await homeBalance("agent", stuck.agent.agentId)).toBe(0);
      expect(await inFlight()).toBe(500);

      // Within its back-off the cron does not take it again (its attempts would count it).
      expect(await recoverTransfers(env, now + 30_000)).toBe(0);
      expect(await statusOf(stuck)).toEqual({ status: "pending", attempts: 1, next: nextAttemptAfter(1, now) });
    } finally {
      await env.DB.prepare(`DROP TRIGGER IF EXISTS ${trigger}`).run();
    }

    // Repaired and past its back-off: the cron finishes it.
    await recoverTransfers(env, Date.now() + 120_000 + 61_000);
    expect(await statusOf(stuck)).toMatchObject({ status: "completed", attempts: 2 });
    expect(await homeBalance("agent", stuck.agent.agentId)).toBe(500);
    expect(await homeBalance("merchant", stuck.merchant.merchantId)).toBe(0);
    expect((await refundsOf(stuck.merchant.apiKey, stuck.chargeId))[0]).toMatchObject({
      refundId: stuck.refundId,
      status: "succeeded",
    });
    await expectShardsAtRest();
  });

  it("backs off a minute, doubling, at most an hour", () => {
    expect(nextAttemptAfter(1, 0)).toBe(new Date(60_000).toISOString());
    expect(nextAttemptAfter(2, 0)).toBe(new Date(120_000).toISOString());
    expect(nextAttemptAfter(3, 0)).toBe(new Date(240_000).toISOString());
    expect(nextAttemptAfter(20, 0)).toBe(new Date(3_600_000).toISOString());
  });
});
