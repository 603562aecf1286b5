import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { recoverTransfers } from "../../src/ledger/transfer-recovery";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import { api } from "../helpers/api";
import { dispatchDirectly } from "../helpers/direct";
import { createCharge, payCharge } from "../helpers/factories";
import { injectOnce, type FaultMode as Mode } from "../helpers/faults";
import {
  agentOn,
  chargePaidRows,
  expectShardsAtRest,
  homeBalance,
  inFlight,
  merchantOn,
  paymentEvents,
  type Recovery,
  recoverBy,
  TRANSFER_FAULTS,
} from "./helpers";

// Hundreds of requests: each goes straight into the fetch handler (test/helpers/direct.ts says why).
dispatchDirectly();

/*
 * A crash at every step of a payment across shards (each transfer seam, the ledger's own around
 * either sequencer's batch), then recovery by the wallet's alarm or by the minute cron: one
 * charge.paid, the agent debited once, no balance below zero, nothing left in flight, and the
 * request's Idempotency-Key answering the same 200.
 */

afterEach(() => setFaultHook(null));

const FAULTS: [FaultPoint, Mode][] = [
  ["payment.before_commit", "throw"],
  ["payment.before_commit", "abort"],
  ...TRANSFER_FAULTS,
];

const payWithKey = (agentKey: string, chargeId: string, key: string) =>
  api("POST", `/charges/${chargeId}/pay`, { token: agentKey, headers: { "idempotency-key": key } });

describe("faults in a payment across shards", () => {
  for (const [point, mode] of FAULTS) {
    for (const how of ["alarm", "cron"] as Recovery[]) {
      const [from, to] = how === "alarm" ? [0, 1] : [1, 0];
      it(`${point} (${mode}), agent in ${from} → charge in ${to}, recovered by the ${how}`, async () => {
        const merchant = await merchantOn(to);
        const agent = await agentOn(from, { credit: 1_000 });
        const charge = await createCharge(merchant.apiKey, 300);
        const key = `fault-${point}-${mode}-${how}`;
        const fired = injectOnce(point, mode);
        const first = await payWithKey(agent.apiKey, charge.chargeId, key);
        expect(fired()).toBe(true);
        setFaultHook(null);
        expect([200, 500]).toContain(first.status);
        // Whatever happened, money is never created: in flight is the payment or nothing.
        expect([0, 300]).toContain(await inFlight());

        await recoverBy(how, agent.agentId);
        const retry = await payWithKey(agent.apiKey, charge.chargeId, key);
        expect(retry.status).toBe(200);
        if (first.status === 200) expect(retry.text).toBe(first.text);
        const stored = await dbOfShard(env, shardOfId(charge.chargeId))
          .prepare("SELECT reference FROM charges WHERE id = ?")
          .bind(charge.chargeId)
          .first<{ reference: string }>();
        expect(retry.body.charge.reference).toBe(stored!.reference);
        expect(retry.body.merchantBalanceMinor).toBe(300);
        // Once more: now a replay of that answer.
        const replay = await payWithKey(agent.apiKey, charge.chargeId, key);
        expect(replay.text).toBe(retry.text);

        expect(await chargePaidRows(charge.chargeId)).toHaveLength(1);
        expect(await paymentEvents(charge.chargeId)).toEqual(["charge.succeeded", "payment.succeeded"]);
        expect(await homeBalance("agent", agent.agentId)).toBe(700);
        expect(await homeBalance("merchant", merchant.merchantId)).toBe(300);
        await expectShardsAtRest();
      });
    }
  }
});

describe("a transfer whose charge is paid by someone else after it was sent", () => {
  for (const [point, mode] of [
    [null, null],
    ["transfer.after_refusal", "throw"],
    ["transfer.after_refusal", "abort"],
    ["transfer.before_settle", "throw"],
  ] as [FaultPoint | null, Mode | null][]) {
    it(`is reversed: the agent gets its money back${point ? ` (${point}, ${mode})` : ""}`, async () => {
      const merchant = await merchantOn(1);
      const late = await agentOn(0, { credit: 1_000 });
      const rival = await agentOn(1, { credit: 1_000 });
      const charge = await createCharge(merchant.apiKey, 400);
      // The late agent's payment stops after its send (P1): its money is in transit.
      injectOnce("transfer.after_send", "throw");
      expect((await payCharge(late.apiKey, charge.chargeId)).status).toBe(500);
      setFaultHook(null);
      expect(await homeBalance("agent", late.agentId)).toBe(600);
      expect(await inFlight()).toBe(400);
      // Meanwhile the rival, in the charge's shard, pays it.
      expect((await payCharge(rival.apiKey, charge.chargeId)).status).toBe(200);

      if (point && mode) {
        injectOnce(point, mode);
        await runDurableObjectAlarm(env.WALLET.getByName(late.agentId)).catch(() => undefined);
        setFaultHook(null);
      }
      await runDurableObjectAlarm(env.WALLET.getByName(late.agentId));
      await recoverTransfers(env, Date.now() + 120_000);

      expect(await homeBalance("agent", late.agentId)).toBe(1_000);
      expect(await homeBalance("agent", rival.agentId)).toBe(600);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(400);
      expect(await chargePaidRows(charge.chargeId)).toHaveLength(1);
      const reversed = await dbOfShard(env, 0)
        .prepare("SELECT status FROM ledger_transfers WHERE agent_id = ?")
        .bind(late.agentId)
        .all<{ status: string }>();
      expect(reversed.results).toEqual([{ status: "reversed" }]);
      const audit = await dbOfShard(env, 0)
        .prepare("SELECT type FROM audit_events WHERE agent_id = ? AND type LIKE 'transfer.%' ORDER BY seq")
        .bind(late.agentId)
        .all<{ type: string }>();
      expect(audit.results.map((r) => r.type)).toEqual(["transfer.sent", "transfer.reversed"]);
      // A later payment of the same charge is refused as any paid charge is.
      const again = await payCharge(late.apiKey, charge.chargeId);
      expect(again.status).toBe(409);
      expect(again.body.error).toBe("charge_not_pending");
      await expectShardsAtRest();
    });
  }
});

describe("two agents in different shards pay one charge at once", () => {
  it("one pays; the other is refused with its balance whole", async () => {
    for (let round = 0; round < 3; round++) {
      const merchant = await merchantOn(1);
      const near = await agentOn(1, { credit: 1_000 });
      const far = await agentOn(0, { credit: 1_000 });
      const charge = await createCharge(merchant.apiKey, 500);
      const [a, b] = await Promise.all([
        payCharge(near.apiKey, charge.chargeId),
        payCharge(far.apiKey, charge.chargeId),
      ]);
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      const loser = a.status === 409 ? a : b;
      expect(loser.body.error).toBe("charge_not_pending");
      const balances = [await homeBalance("agent", near.agentId), await homeBalance("agent", far.agentId)].sort(
        (x, y) => x - y,
      );
      expect(balances).toEqual([500, 1_000]);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(500);
      expect(await chargePaidRows(charge.chargeId)).toHaveLength(1);
      expect(await paymentEvents(charge.chargeId)).toEqual(["charge.succeeded", "payment.succeeded"]);
      await expectShardsAtRest();
    }
  });
});

describe("daily limits", () => {
  it("count transfers pending or completed, not reversed ones", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 5_000, policy: { dailyLimitUsdCents: 1_000 } });
    const first = await createCharge(merchant.apiKey, 700);
    expect((await payCharge(agent.apiKey, first.chargeId)).status).toBe(200);
    const second = await createCharge(merchant.apiKey, 400);
    const over = await payCharge(agent.apiKey, second.chargeId);
    expect(over.status).toBe(402);
    expect(await homeBalance("agent", agent.agentId)).toBe(4_300);
    await expectShardsAtRest();
  });
});
