import { env } from "cloudflare:workers";
import { erc20Abi, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { x402PaymentPlan } from "../../src/ledger/movements";
import { setFaultHook } from "../../src/lib/faults";
import { newId } from "../../src/lib/ids";
import { dueOutbound, RESEND_AFTER_MS } from "../../src/outbound/advance";
import { advanceDuePayouts, createPayout } from "../../src/payouts/service";
import { advanceDueRefunds, createRefund } from "../../src/refunds/service";
import { api, consoleToken } from "../helpers/api";
import { createCharge, payCharge } from "../helpers/factories";
import { refund, refundsOf } from "../helpers/money-out";
import { waitFor } from "../helpers/wait";
import { chain, publicClient, tokenBalance } from "../helpers/x402";
import { agentOn, expectShardsAtRest, homeBalance, merchantOn } from "./helpers";

/*
 * Money leaving a merchant on chain with two ledger shards: a payout, and the refund of an x402
 * payment. The merchant's home shard holds all of it (the row and its id, the debit, the outbound
 * transfer and its outcome); the chain sends it at most once, recorded once, and the cron's pass
 * covers every shard. Against the real local chain, from the settlement address.
 */

afterEach(() => setFaultHook(null));

const x402 = () => settingsOf(env).x402!;
const UNITS_PER_CENT = 10_000n;
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

const count = async (shard: number, sql: string, ...params: unknown[]) =>
  (await dbOfShard(env, shard)
    .prepare(sql)
    .bind(...params)
    .first<{ n: number }>())!.n;

/** Every token Transfer from the settlement address to `to`. */
async function transfersTo(to: Hex) {
  const logs = await publicClient().getContractEvents({
    address: chain().token,
    abi: erc20Abi,
    eventName: "Transfer",
    args: { from: x402().payTo, to },
    fromBlock: 0n,
  });
  return logs.map((l) => ({ transaction: l.transactionHash, value: l.args.value! }));
}

/** A merchant on `shard` earning `cents` from a wallet payment of an agent on `agentShard`, with a fresh payout address. */
async function fundedOn(shard: number, cents: number, agentShard = shard) {
  const merchant = await merchantOn(shard);
  const agent = await agentOn(agentShard, { credit: cents });
  const charge = await createCharge(merchant.apiKey, cents);
  expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
  const address = freshAddress();
  const set = await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } });
  expect(set.status).toBe(200);
  return { ...merchant, address };
}

const payoutOf = (merchantKey: string, payoutId: string) =>
  api("GET", `/merchant/payouts/${payoutId}`, { token: merchantKey }).then((r) => r.body.payout);

const settled = (merchantKey: string, payoutId: string) =>
  waitFor(
    `payout ${payoutId}`,
    () => payoutOf(merchantKey, payoutId),
    (p) => p?.status !== "pending",
  );

/** Where a payout or a refund (its owner) and its outbound transfer are recorded, per shard. */
async function recordsOf(table: "payouts" | "refunds", ownerId: string) {
  const where = [0, 1].map(async (k) => ({
    rows: await count(k, `SELECT COUNT(*) AS n FROM ${table} WHERE id = ?`, ownerId),
    transfers: await count(k, "SELECT COUNT(*) AS n FROM outbound_transfers WHERE owner_id = ?", ownerId),
  }));
  return Promise.all(where);
}

describe("payouts of a merchant on shard 1", () => {
  it("pays out from its home balance: the payout, its transfer and its outcome in shard 1, sent once", async () => {
    const m = await fundedOn(1, 1_250, 0);
    expect(await homeBalance("merchant", m.merchantId)).toBe(1_250);
    const headers = { "Idempotency-Key": `payout-s1-${crypto.randomUUID()}` };
    const res = await api("POST", "/merchant/payouts", { token: m.apiKey, headers, body: { amountUsdCents: 1_000 } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.balanceMinor).toBe(250);
    const payoutId = res.body.payout.payoutId as string;
    expect(payoutId).toMatch(/^po_s1_/);
    expect(shardOfId(payoutId)).toBe(1);

    const paid = await settled(m.apiKey, payoutId);
    expect(paid.status).toBe("paid");
    expect(await tokenBalance(m.address)).toBe(1_000n * UNITS_PER_CENT);
    expect(await transfersTo(m.address)).toHaveLength(1);
    expect(await homeBalance("merchant", m.merchantId)).toBe(250);
    expect(await recordsOf("payouts", payoutId)).toEqual([
      { rows: 0, transfers: 0 },
      { rows: 1, transfers: 1 },
    ]);
    const transfer = await dbOfShard(env, 1)
      .prepare("SELECT id, status FROM outbound_transfers WHERE owner_id = ?")
      .bind(payoutId)
      .first<{ id: string; status: string }>();
    expect(transfer!.id).toMatch(/^otx_s1_/);
    expect(transfer!.status).toBe("confirmed");
    expect(
      await count(
        1,
        "SELECT COUNT(*) AS n FROM audit_events WHERE reference = ? AND type IN ('payout.created', 'payout.paid')",
        payoutId,
      ),
    ).toBe(2);

    // Its receipt is read in its shard.
    const receipt = await api("GET", `/merchant/payouts/${payoutId}/receipt`, { token: m.apiKey });
    expect(receipt.status, receipt.text).toBe(200);
    expect(typeof receipt.body.receipt).toBe("string");

    // The key answers the same bytes; lists and reads find it.
    const again = await api("POST", "/merchant/payouts", { token: m.apiKey, headers, body: { amountUsdCents: 1_000 } });
    expect(again.status).toBe(201);
    expect(again.text).toBe(res.text);
    const mine = await api("GET", "/merchant/payouts", { token: m.apiKey });
    expect(mine.body.payouts.map((p: { payoutId: string }) => p.payoutId)).toEqual([payoutId]);
    const consoleList = await api("GET", "/console/payouts?limit=100", { token: await consoleToken() });
    expect(consoleList.body.payouts.some((p: { payoutId: string }) => p.payoutId === payoutId)).toBe(true);
    // Another merchant does not find it.
    const stranger = await merchantOn(1);
    expect((await api("GET", `/merchant/payouts/${payoutId}`, { token: stranger.apiKey })).status).toBe(404);

    // (A pass over a row handed over but not yet recorded sends nothing again: "a crash after the broadcast" below.)
    expect(await transfersTo(m.address)).toHaveLength(1);
    await expectShardsAtRest();
  });

  it("refuses more than the home balance, on shard 1", async () => {
    const m = await fundedOn(1, 300);
    const res = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 301 } });
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("saldo_insuficiente");
    await expectShardsAtRest();
  });

  it("screens the payout address again in either home: blocklisted after it was set, 403, nothing taken", async () => {
    for (const shard of [0, 1]) {
      // Shard 0 is control, which keeps the blocklist: its payout batch reads the list; shard 1 reads it first.
      const m = await fundedOn(shard, 300);
      const block = await api("POST", "/console/kyt/blocklist", {
        token: await consoleToken(),
        body: { address: m.address.toLowerCase(), reason: "test" },
      });
      expect(block.status, block.text).toBe(201);
      const res = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 100 } });
      expect(res.status, `shard ${shard}`).toBe(403);
      expect(res.body).toEqual({ error: "payout_address_flagged", verdict: "block", reason: "operator_blocklist" });
      expect(await homeBalance("merchant", m.merchantId)).toBe(300);
      expect(await count(shard, "SELECT COUNT(*) AS n FROM payouts WHERE merchant_id = ?", m.merchantId)).toBe(0);
      expect(
        await count(
          shard,
          "SELECT COUNT(*) AS n FROM audit_events WHERE merchant_id = ? AND type = 'payout.created'",
          m.merchantId,
        ),
      ).toBe(0);
    }
  });

  it("concurrent payouts never take more than the home balance", async () => {
    const m = await fundedOn(1, 1_000);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 400 } }),
      ),
    );
    const ok = answers.filter((r) => r.status === 201);
    expect(ok).toHaveLength(2);
    for (const r of answers.filter((r) => r.status !== 201)) expect(r.body.error).toBe("saldo_insuficiente");
    for (const r of ok) expect((await settled(m.apiKey, r.body.payout.payoutId)).status).toBe("paid");
    expect(await homeBalance("merchant", m.merchantId)).toBe(200);
    expect(await transfersTo(m.address)).toHaveLength(2);
    await expectShardsAtRest();
  });

  it("the cron's pass sends a shard-1 payout whose request never did, once", async () => {
    const m = await fundedOn(1, 500);
    // Taken without the send the route starts after its answer: as if the request stopped there.
    const { payout } = await createPayout(env, x402(), m.merchantId, 500, undefined);
    expect(payout.status).toBe("pending");
    // Fresh, it is not the cron's yet (its request may still be sending it): the pass leaves it.
    await advanceDuePayouts(env, x402());
    expect((await payoutOf(m.apiKey, payout.payoutId)).status).toBe("pending");
    expect(await transfersTo(m.address)).toEqual([]);
    const counts = await advanceDuePayouts(env, x402(), Date.now() + RESEND_AFTER_MS + 5_000);
    expect(counts.confirmed).toBeGreaterThanOrEqual(1);
    expect((await payoutOf(m.apiKey, payout.payoutId)).status).toBe("paid");
    expect(await transfersTo(m.address)).toHaveLength(1);
    expect(await tokenBalance(m.address)).toBe(500n * UNITS_PER_CENT);
    expect(await homeBalance("merchant", m.merchantId)).toBe(0);
    await expectShardsAtRest();
  });

  it("a crash after the broadcast: the cron records it paid once, from shard 1's row", async () => {
    const m = await fundedOn(1, 600);
    let fired = false;
    setFaultHook((at) => {
      if (fired || at !== "outbound.after_send") return;
      fired = true;
      throw new Error("injected fault at outbound.after_send");
    });
    const res = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 600 } });
    expect(res.status).toBe(201);
    await waitFor("the fault", async () => fired, Boolean);
    await waitFor(
      "the transfer on chain",
      () => transfersTo(m.address),
      (t) => t.length === 1,
    );
    const payoutId = res.body.payout.payoutId as string;
    expect((await payoutOf(m.apiKey, payoutId)).status).toBe("pending");
    setFaultHook(null);
    await advanceDuePayouts(env, x402(), Date.now() + RESEND_AFTER_MS + 5_000);
    await advanceDuePayouts(env, x402(), Date.now() + 2 * RESEND_AFTER_MS + 5_000);
    expect((await payoutOf(m.apiKey, payoutId)).status).toBe("paid");
    expect(await transfersTo(m.address)).toHaveLength(1);
    expect(
      await count(
        1,
        "SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'payout.paid' AND json_extract(data, '$.payoutId') = ?",
        payoutId,
      ),
    ).toBe(1);
    await expectShardsAtRest();
  });
});

/**
 * A merchant on shard 1 and a charge of `cents` paid with x402 by `payer`, recorded as a settled
 * x402 payment in the charge's shard. Written here with the ledger's own plan: taking x402 payments
 * for a shard-1 charge through the route is another change's, and this file tests what follows.
 */
async function x402PaidOnShard1(cents: number, payer: Hex) {
  const merchant = await merchantOn(1);
  const charge = await createCharge(merchant.apiKey, cents);
  const db = dbOfShard(env, 1);
  const paymentId = newId("x402Payment", { shard: 1 });
  const now = new Date().toISOString();
  const x = x402();
  await db.batch([
    db
      .prepare(
        `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, pay_to, value, valid_before, payload, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{}', 'settling', ?, ?)`,
      )
      .bind(
        paymentId,
        x.network,
        x.asset.toLowerCase(),
        payer.toLowerCase(),
        `0x${crypto.randomUUID().replace(/-/g, "").padEnd(64, "0")}`,
        charge.chargeId,
        x.payTo.toLowerCase(),
        (BigInt(cents) * UNITS_PER_CENT).toString(),
        Math.floor(Date.now() / 1000) + 3600,
        now,
        now,
      ),
    db.prepare("UPDATE charges SET x402_claim = ? WHERE id = ?").bind(paymentId, charge.chargeId),
  ]);
  const paid = await ledgerOf(env, 1).commit(
    x402PaymentPlan({
      charge: {
        id: charge.chargeId,
        merchantId: merchant.merchantId,
        amountMinor: cents,
        amountBaseUnits: cents * 10_000,
        currency: "USD",
        description: null,
        checkoutLinkId: null,
      },
      paymentId,
      network: x.network,
      payer: payer.toLowerCase(),
      transaction: `0x${"ab".repeat(16)}${crypto.randomUUID().replace(/-/g, "")}`,
      paidAt: now,
    }),
  );
  expect(paid.kind).toBe("committed");
  return { merchant, chargeId: charge.chargeId as string };
}

describe("x402 refunds of a merchant on shard 1", () => {
  it("debits the home balance, sends the amount back to the payer once, and records it in shard 1", async () => {
    const payer = freshAddress();
    const { merchant, chargeId } = await x402PaidOnShard1(500, payer);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(500);
    const res = await refund(merchant.apiKey, chargeId, { amountUsdCents: 200 });
    expect(res.status, res.text).toBe(201);
    expect(res.body.refund).toMatchObject({ method: "x402", status: "pending", amountMinor: 200 });
    const refundId = res.body.refund.refundId as string;
    expect(refundId).toMatch(/^re_s1_/);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(300);

    const done = await waitFor(
      `refund ${refundId}`,
      async () => (await refundsOf(merchant.apiKey, chargeId)).find((r) => r.refundId === refundId)!,
      (r) => r.status !== "pending",
    );
    expect(done.status).toBe("succeeded");
    expect(await tokenBalance(payer)).toBe(200n * UNITS_PER_CENT);
    expect(await recordsOf("refunds", refundId)).toEqual([
      { rows: 0, transfers: 0 },
      { rows: 1, transfers: 1 },
    ]);
    expect(
      await count(
        1,
        "SELECT COUNT(*) AS n FROM audit_events WHERE reference = ? AND type IN ('refund.created', 'charge.refunded')",
        refundId,
      ),
    ).toBe(2);
    expect(await transfersTo(payer)).toHaveLength(1);
    await expectShardsAtRest();
  });

  it("the cron's pass sends a shard-1 x402 refund whose request never did, once", async () => {
    const payer = freshAddress();
    const { merchant, chargeId } = await x402PaidOnShard1(400, payer);
    const created = await createRefund(env, x402(), merchant.merchantId, chargeId, undefined, undefined);
    expect(created.refund.status).toBe("pending");
    // Due once untouched for RESEND_AFTER_MS: the pass is run with its clock moved past it.
    const due = await dueOutbound(dbOfShard(env, 1), "refund", Date.now() + RESEND_AFTER_MS + 5_000);
    expect(due.map((t) => t.ownerId)).toContain(created.refund.refundId);
    // The pass sends it and the answer is lost: left pending, handed over.
    let fired = false;
    setFaultHook((at) => {
      if (fired || at !== "outbound.after_send") return;
      fired = true;
      throw new Error("injected fault at outbound.after_send");
    });
    await advanceDueRefunds(env, x402(), Date.now() + RESEND_AFTER_MS + 5_000);
    expect(fired).toBe(true);
    setFaultHook(null);
    expect((await refundsOf(merchant.apiKey, chargeId))[0]).toMatchObject({ status: "pending" });
    const handed = await dbOfShard(env, 1)
      .prepare("SELECT status, broadcast_at AS broadcastAt FROM outbound_transfers WHERE owner_id = ?")
      .bind(created.refund.refundId)
      .first<{ status: string; broadcastAt: string | null }>();
    expect(handed!.status).toBe("pending");
    expect(handed!.broadcastAt).not.toBeNull();
    expect(await transfersTo(payer)).toHaveLength(1);
    // Past the resend window the next pass reads the chain: recorded from the one transfer, none sent again.
    await advanceDueRefunds(env, x402(), Date.now() + 2 * RESEND_AFTER_MS + 5_000);
    const [r] = await refundsOf(merchant.apiKey, chargeId);
    expect(r).toMatchObject({ refundId: created.refund.refundId, status: "succeeded", amountMinor: 400 });
    expect(await transfersTo(payer)).toHaveLength(1);
    expect(await tokenBalance(payer)).toBe(400n * UNITS_PER_CENT);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(0);
    await expectShardsAtRest();
  });
});
