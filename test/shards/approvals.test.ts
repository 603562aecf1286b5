import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { expireOverdueApprovalsEverywhere } from "../../src/approvals/service";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { recoverTransfers } from "../../src/ledger/transfer-recovery";
import { setFaultHook } from "../../src/lib/faults";
import { api, consoleToken } from "../helpers/api";
import { createCharge, payCharge } from "../helpers/factories";
import { injectOnce } from "../helpers/faults";
import { agentOn, chargePaidRows, expectShardsAtRest, homeBalance, inFlight, merchantOn } from "./helpers";

/*
 * Approvals with two ledger shards: a payment over the threshold is held on the agent's home shard
 * (the approval's id naming it); granting it pays the charge as a wallet payment does, across shards
 * through transit, the approval's flip in the same batch as the agent's debit.
 */

afterEach(() => setFaultHook(null));

const POLICY = { approvalThresholdUsdCents: 1_000 };
const grant = async (id: string, key?: string) =>
  api("POST", `/approvals/${id}/grant`, {
    token: await consoleToken(),
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });
const reject = async (id: string) => api("POST", `/approvals/${id}/reject`, { token: await consoleToken() });
const approvalRow = (id: string) =>
  dbOfShard(env, shardOfId(id))
    .prepare("SELECT status, decided_by AS decidedBy FROM approvals WHERE id = ?")
    .bind(id)
    .first<{ status: string; decidedBy: string | null }>();

async function held(m: number, a: number, amount = 2_500) {
  const merchant = await merchantOn(m);
  const agent = await agentOn(a, { credit: 10_000, policy: POLICY });
  const charge = await createCharge(merchant.apiKey, amount);
  const res = await payCharge(agent.apiKey, charge.chargeId);
  expect(res.status).toBe(402);
  const approvalId = res.body.approvalId as string;
  expect(shardOfId(approvalId)).toBe(a);
  return { merchant, agent, charge, approvalId };
}

const PAIRS: [number, number][] = [
  [1, 1],
  [0, 1],
  [1, 0],
];

describe("approvals across ledger shards", () => {
  for (const [m, a] of PAIRS) {
    it(`merchant in ${m}, agent in ${a}: held on the agent's shard, granted and paid once`, async () => {
      const { merchant, agent, charge, approvalId } = await held(m, a);
      // Paying again returns the same pending approval, read on the agent's shard.
      expect((await payCharge(agent.apiKey, charge.chargeId)).body.approvalId).toBe(approvalId);
      const listed = await api("GET", "/console/approvals?status=pending", { token: await consoleToken() });
      expect(listed.body.approvals.map((x: { approvalId: string }) => x.approvalId)).toContain(approvalId);

      const granted = await grant(approvalId, `grant-${m}-${a}`);
      expect(granted.status).toBe(200);
      expect(granted.body.charge).toMatchObject({ status: "paid", agentId: agent.agentId });
      expect((await grant(approvalId, `grant-${m}-${a}`)).text).toBe(granted.text);
      const again = await grant(approvalId);
      expect(again.status).toBe(409);
      expect(again.body.error).toBe("approval_not_pending");
      expect(await approvalRow(approvalId)).toMatchObject({ status: "granted" });
      expect(await homeBalance("agent", agent.agentId)).toBe(7_500);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(2_500);
      expect(await chargePaidRows(charge.chargeId)).toHaveLength(1);
      expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("paid");
      await expectShardsAtRest();
    });
  }

  it("a rejected approval on shard 1 leaves the charge pending and moves nothing", async () => {
    const { agent, merchant, charge, approvalId } = await held(0, 1);
    const rejected = await reject(approvalId);
    expect(rejected.status).toBe(200);
    expect(await approvalRow(approvalId)).toMatchObject({ status: "rejected" });
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
    expect(await homeBalance("agent", agent.agentId)).toBe(10_000);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(0);
    expect((await grant("apr_s1_aaaaaaaaaaaaaaaaaaaaaaaa")).status).toBe(404);
    await expectShardsAtRest();
  });

  it("expiry runs on every shard: an overdue approval on shard 1 expires and cannot be granted", async () => {
    const { approvalId } = await held(0, 1);
    await dbOfShard(env, 1)
      .prepare("UPDATE approvals SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?")
      .bind(approvalId)
      .run();
    expect(await expireOverdueApprovalsEverywhere(env)).toBeGreaterThanOrEqual(1);
    expect(await approvalRow(approvalId)).toMatchObject({ status: "expired" });
    expect((await grant(approvalId)).status).toBe(409);
    await expectShardsAtRest();
  });

  it("a charge paid by another agent meanwhile: the approval on the other shard is expired, as within one", async () => {
    const { agent, merchant, charge, approvalId } = await held(1, 0);
    const rival = await agentOn(1, { credit: 5_000 });
    expect((await payCharge(rival.apiKey, charge.chargeId)).status).toBe(200);
    const refused = await grant(approvalId);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("approval_not_pending");
    expect(await homeBalance("agent", agent.agentId)).toBe(10_000);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(2_500);
    expect(await approvalRow(approvalId)).toMatchObject({ status: "expired" });
    await expectShardsAtRest();
  });

  it("a checkout link over the threshold across shards: the charge on the merchant's shard, held on the agent's", async () => {
    const merchant = await merchantOn(1);
    const agent = await agentOn(0, { credit: 10_000, policy: POLICY });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 2_000, description: "big report" },
    });
    const res = await api("POST", `/checkout/${link.body.checkoutToken}/pay`, { token: agent.apiKey });
    expect(res.status).toBe(402);
    expect(shardOfId(res.body.approvalId)).toBe(0);
    const chargeId = res.body.charge.chargeId as string;
    expect(shardOfId(chargeId)).toBe(1);
    expect((await grant(res.body.approvalId)).status).toBe(200);
    expect(await homeBalance("agent", agent.agentId)).toBe(8_000);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(2_000);
    const listed = await api("GET", "/merchant/checkout-links", { token: merchant.apiKey });
    expect(listed.body.links[0]).toMatchObject({ paymentsCount: 1, totalPaidMinor: 2_000 });
    await expectShardsAtRest();
  });

  it("a link disabled between the hold and the grant across shards: the send is reversed, the approval pending again", async () => {
    const merchant = await merchantOn(0);
    const agent = await agentOn(1, { credit: 10_000, policy: POLICY });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 2_000, description: "big report" },
    });
    const token = link.body.checkoutToken as string;
    const held = await api("POST", `/checkout/${token}/pay`, { token: agent.apiKey });
    expect(held.status).toBe(402);
    const approvalId = held.body.approvalId as string;
    const off = await api("PATCH", `/merchant/checkout-links/${token}`, {
      token: merchant.apiKey,
      body: { active: false },
    });
    expect(off.status).toBe(200);
    const refused = await grant(approvalId);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("checkout_link_disabled");
    expect(await approvalRow(approvalId)).toEqual({ status: "pending", decidedBy: null });
    expect(await homeBalance("agent", agent.agentId)).toBe(10_000);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(0);
    // The reversal is on the agent's chain, the refusal on the merchant's shard.
    const reversed = await dbOfShard(env, 1)
      .prepare("SELECT status FROM ledger_transfers WHERE charge_id = ?")
      .bind(held.body.charge.chargeId)
      .first<{ status: string }>();
    expect(reversed).toEqual({ status: "reversed" });
    // Enabled again, the same approval is granted and paid.
    await api("PATCH", `/merchant/checkout-links/${token}`, { token: merchant.apiKey, body: { active: true } });
    expect((await grant(approvalId)).status).toBe(200);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(2_000);
    await expectShardsAtRest();
  });

  for (const how of ["alarm", "cron"] as const) {
    it(`a crash after the send of a grant across shards is finished by the ${how}`, async () => {
      const [m, a] = how === "alarm" ? [1, 0] : [0, 1];
      const { merchant, agent, charge, approvalId } = await held(m, a);
      const fired = injectOnce("transfer.after_send", "abort");
      const first = await grant(approvalId, `grant-fault-${how}`);
      expect(fired()).toBe(true);
      setFaultHook(null);
      expect(first.status).toBe(500);
      expect(await inFlight()).toBe(2_500);
      if (how === "alarm") await runDurableObjectAlarm(env.WALLET.getByName(agent.agentId));
      else await recoverTransfers(env, Date.now() + 120_000);
      expect(await approvalRow(approvalId)).toMatchObject({ status: "granted" });
      // The retry under the same key is answered with the payment that landed.
      const retry = await grant(approvalId, `grant-fault-${how}`);
      expect(retry.status).toBe(200);
      expect(retry.body).toMatchObject({
        approval: { approvalId, status: "granted" },
        charge: { chargeId: charge.chargeId, status: "paid" },
      });
      expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("paid");
      expect(await homeBalance("agent", agent.agentId)).toBe(7_500);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(2_500);
      await expectShardsAtRest();
    });
  }
});

describe("an approval id of a shard this deployment does not run", () => {
  it("is not found on grant (keyed or not) and reject: 404, never a 500", async () => {
    const id = "apr_s7_aaaaaaaaaaaaaaaaaaaaaaaa";
    for (const res of [await grant(id), await grant(id, "apr-s7-key"), await reject(id)]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: "approval_not_found" });
    }
  });
});
