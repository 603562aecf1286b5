import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { afterEach, describe, expect, it } from "vitest";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { setFaultHook } from "../../src/lib/faults";
import { reconcileOpenPayments } from "../../src/x402/reconcile";
import { settlerOf } from "../../src/x402/settler.do";
import { type ApiResponse, api, consoleToken } from "../helpers/api";
import { createCharge, createCheckoutLink } from "../helpers/factories";
import { type FaultMode, injectOnce } from "../helpers/faults";
import { waitFor } from "../helpers/wait";
import { freshPayer, type Payer, tokenBalance, xPaymentFor } from "../helpers/x402";
import { chargePaidRows, expectShardsAtRest, homeBalance, merchantOn, paymentEvents } from "./helpers";

/*
 * x402 on a merchant's charge with two ledger shards, against the real local chain and the
 * built-in facilitator. The payment lives with the charge in the merchant's shard (its id carries
 * it): the reservation, the claim, the credit on that shard's sequencer and chain, the settlement's
 * status and its reconciliation. Payers are fresh keys funded for exactly what they pay.
 */
const CENTS = 230;
const VALUE = BigInt(CENTS) * 10_000n;

afterEach(() => setFaultHook(null));

const x402Path = (chargeId: string) => `/charges/${chargeId}/x402`;
const pay = (chargeId: string, header: string) => api("GET", x402Path(chargeId), { headers: { "X-PAYMENT": header } });
const isSettled = (r: ApiResponse) => r.status === 200 && r.body?.settlement?.success === true;
const chargeOf = async (chargeId: string) => (await api("GET", `/charges/${chargeId}`)).body;

/** The x402 payments of a charge in one shard's database. */
const paymentsIn = async (shard: number, chargeId: string) =>
  (
    await dbOfShard(env, shard)
      .prepare("SELECT id, status, tx_hash AS txHash, error FROM x402_payments WHERE charge_id = ? ORDER BY created_at")
      .bind(chargeId)
      .all<{ id: string; status: string; txHash: string | null; error: string | null }>()
  ).results;

async function shopOn(shard: number) {
  const merchant = await merchantOn(shard, { name: `x402 shop ${shard}` });
  return merchant;
}

async function chargeOn(shard: number, merchant?: { merchantId: string; apiKey: string }) {
  const m = merchant ?? (await shopOn(shard));
  const { chargeId } = await createCharge(m.apiKey, CENTS);
  expect(shardOfId(chargeId)).toBe(shard);
  return { merchant: m, chargeId };
}

/** Everything a paid x402 charge leaves, in the charge's shard and nowhere else. */
async function expectPaidOnce(chargeId: string, merchantId: string, payTo: Hex, before: number) {
  const shard = shardOfId(chargeId);
  const other = 1 - shard;
  expect(await chargeOf(chargeId)).toMatchObject({ status: "paid", method: "x402" });
  expect(await homeBalance("merchant", merchantId)).toBe(before + CENTS);
  const rows = await paymentsIn(shard, chargeId);
  expect(rows.filter((r) => r.status === "settled")).toHaveLength(1);
  expect(shardOfId(rows.find((r) => r.status === "settled")!.id)).toBe(shard);
  expect(await paymentsIn(other, chargeId)).toEqual([]);
  expect(await chargePaidRows(chargeId)).toHaveLength(1);
  expect(await paymentEvents(chargeId)).toEqual(["charge.succeeded"]);
  // What reached the charge's own receiving address on chain: exactly one payment.
  expect(await tokenBalance(payTo)).toBe(VALUE);
}

describe("x402 with two ledger shards", () => {
  for (const shard of [1, 0]) {
    it(`pays a charge on shard ${shard} in that shard: credited there once, its settlement readable by id and by authorization`, async () => {
      const { merchant, chargeId } = await chargeOn(shard);
      const payer = await freshPayer(VALUE);
      const before = await homeBalance("merchant", merchant.merchantId);
      const { header, payload } = await xPaymentFor(x402Path(chargeId), payer.key, VALUE);
      const res = await pay(chargeId, header);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ chargeId, status: "paid", settlement: { success: true } });
      const settlementId = res.body.settlement.settlementId as string;
      expect(shardOfId(settlementId)).toBe(shard);
      await expectPaidOnce(chargeId, merchant.merchantId, payload.authorization.to as Hex, before);
      expect(await tokenBalance(payer.address)).toBe(0n);

      // The settlement's status, by its id (the shard it names) and by the authorization (every shard asked).
      const byId = await api("GET", `/x402/settlements/${settlementId}`);
      expect(byId.status).toBe(200);
      expect(byId.body).toMatchObject({
        settlementId,
        status: "settled",
        chargeId,
        transaction: res.body.settlement.transaction,
      });
      const byAuthorization = await api(
        "GET",
        `/x402/settlements?payer=${payer.address}&nonce=${payload.authorization.nonce}`,
      );
      expect(byAuthorization.status).toBe(200);
      expect(byAuthorization.body).toMatchObject({ settlementId, status: "settled", chargeId });
      // A paid charge answers with itself, read in its shard; the same payment sent again gets its settlement back.
      expect((await api("GET", x402Path(chargeId))).body).toMatchObject({ chargeId, status: "paid" });
      const again = await pay(chargeId, header);
      expect(again.status).toBe(200);
      expect(again.body.settlement.settlementId).toBe(settlementId);
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(before + CENTS);
      await expectShardsAtRest();
    });
  }

  it("a settlement id naming a shard this deployment does not run, or a charge there, is 404", async () => {
    const missing = await api("GET", "/x402/settlements/xpay_s7_0123456789abcdefghjkmnpqrs");
    expect(missing.status).toBe(404);
    expect((await api("GET", x402Path("chg_s7_0123456789abcdefghjkmnpqrs"))).status).toBe(404);
  });

  for (const [from, to] of [
    [0, 1],
    [1, 0],
  ] as const) {
    it(`an authorization that paid a charge on shard ${from} pays no charge on shard ${to}`, async () => {
      const paid = await chargeOn(from);
      const target = await chargeOn(to);
      const payer = await freshPayer(2n * VALUE);
      const paidBefore = await homeBalance("merchant", paid.merchant.merchantId);
      const targetBefore = await homeBalance("merchant", target.merchant.merchantId);
      const { header, payload } = await xPaymentFor(x402Path(paid.chargeId), payer.key, VALUE);
      expect(isSettled(await pay(paid.chargeId, header))).toBe(true);

      // The same signed authorization sent for the other shard's charge: it signs the first charge's
      // receiving address, which is no other charge's, so it is refused before anything is reserved.
      const replay = await pay(target.chargeId, header);
      expect(replay.status).toBe(402);
      expect(replay.body.invalidReason).toBe("invalid_exact_evm_payload_recipient_mismatch");
      expect(await paymentsIn(to, target.chargeId)).toEqual([]);
      expect(await chargeOf(target.chargeId)).toMatchObject({ status: "pending" });
      expect(await homeBalance("merchant", target.merchant.merchantId)).toBe(targetBefore);
      await expectPaidOnce(paid.chargeId, paid.merchant.merchantId, payload.authorization.to as Hex, paidBefore);
      // The payer kept what the replay would have taken.
      expect(await tokenBalance(payer.address)).toBe(VALUE);
      await expectShardsAtRest();
    });
  }

  it("an authorization for a charge on shard 0 sent first to a charge on shard 1 is refused there, then pays its own once", async () => {
    const own = await chargeOn(0);
    const other = await chargeOn(1);
    const payer = await freshPayer(VALUE);
    const before = await homeBalance("merchant", own.merchant.merchantId);
    const { header, payload } = await xPaymentFor(x402Path(own.chargeId), payer.key, VALUE);
    const wrong = await pay(other.chargeId, header);
    expect(wrong.status).toBe(402);
    expect(wrong.body.invalidReason).toBe("invalid_exact_evm_payload_recipient_mismatch");
    expect(await paymentsIn(1, other.chargeId)).toEqual([]);
    expect(isSettled(await pay(own.chargeId, header))).toBe(true);
    await expectPaidOnce(own.chargeId, own.merchant.merchantId, payload.authorization.to as Hex, before);
    await expectShardsAtRest();
  });

  it("concurrent payments of one charge on shard 1 (several payers, and one authorization sent thrice) pay it once", async () => {
    const { merchant, chargeId } = await chargeOn(1);
    const before = await homeBalance("merchant", merchant.merchantId);
    const payers: Payer[] = await Promise.all(Array.from({ length: 4 }, () => freshPayer(VALUE)));
    const headers = await Promise.all(payers.map((p) => xPaymentFor(x402Path(chargeId), p.key, VALUE)));
    const sent = [...headers.map((h) => h.header), headers[0]!.header, headers[0]!.header];
    const answers = await Promise.all(sent.map((h) => pay(chargeId, h)));
    // The authorization that claimed the charge is answered with its settlement: 200 once the chain has
    // it, or 202 (pending) when the chain took longer than the facilitator's timeout (a loaded machine);
    // a repeat of it is sent to the same settlement (202), never paid again. They all name one settlement.
    const withSettlement = answers.filter((a) => isSettled(a) || a.status === 202);
    expect(withSettlement.length, JSON.stringify(answers.map((a) => [a.status, a.body]))).toBeGreaterThanOrEqual(1);
    expect(new Set(withSettlement.map((a) => a.body.settlement.settlementId)).size).toBe(1);
    const settlementId = withSettlement[0]!.body.settlement.settlementId as string;
    expect(shardOfId(settlementId)).toBe(1);
    for (const a of answers) {
      if (withSettlement.includes(a)) continue;
      // The others: refused while the charge was claimed (charge_settlement_in_progress, in the protocol's words), or answered with the paid charge.
      if (a.status === 402) expect(a.body.invalidReason).toBe("invalid_transaction_state");
      else expect(a.body).toMatchObject({ chargeId, status: "paid" });
    }
    // A settlement left pending is decided from the chain by reconciliation, as the cron would.
    await waitFor(
      "the settlement",
      async () => {
        await reconcileOpenPayments(env);
        return (await api("GET", `/x402/settlements/${settlementId}`)).body;
      },
      (settlement) => settlement.status === "settled",
    );
    await expectPaidOnce(chargeId, merchant.merchantId, headers[0]!.payload.authorization.to as Hex, before);
    const spent = await Promise.all(payers.map((p) => tokenBalance(p.address)));
    expect(spent.filter((b) => b === 0n)).toHaveLength(1);
    expect(spent.filter((b) => b === VALUE)).toHaveLength(payers.length - 1);
    expect(await paymentsIn(0, chargeId)).toEqual([]);
    await expectShardsAtRest();
  });

  it("the console's receiving report counts and lists the settled payments of every shard, with their owners from control", async () => {
    const paid = [];
    for (const shard of [0, 1]) {
      const { merchant, chargeId } = await chargeOn(shard);
      const payer = await freshPayer(VALUE);
      const { header, payload } = await xPaymentFor(x402Path(chargeId), payer.key, VALUE);
      expect(isSettled(await pay(chargeId, header))).toBe(true);
      paid.push({ chargeId, merchantId: merchant.merchantId, address: payload.authorization.to.toLowerCase() });
    }
    const settled = async (shard: number) =>
      (await dbOfShard(env, shard)
        .prepare(
          "SELECT COUNT(*) AS n, COALESCE(SUM(CAST(value AS INTEGER)), 0) AS v FROM x402_payments WHERE status = 'settled' AND pay_to IS NOT NULL",
        )
        .first<{ n: number; v: number }>())!;
    const [zero, one] = [await settled(0), await settled(1)];
    expect(zero.n).toBeGreaterThan(0);
    expect(one.n).toBeGreaterThan(0);
    const res = await api("GET", "/console/x402/receiving-addresses?limit=200", { token: await consoleToken() });
    expect(res.status).toBe(200);
    expect(res.body.totals).toEqual({
      addresses: zero.n + one.n,
      payments: zero.n + one.n,
      receivedBaseUnits: String(zero.v + one.v),
    });
    expect(res.body.addresses).toHaveLength(zero.n + one.n);
    for (const p of paid)
      expect(res.body.addresses).toContainEqual(
        expect.objectContaining({
          address: p.address,
          ownerKind: "charge",
          ownerId: p.chargeId,
          merchantId: p.merchantId,
          payments: 1,
          receivedBaseUnits: VALUE.toString(),
          balanceBaseUnits: VALUE.toString(),
        }),
      );
    // Newest first over both shards: the shard-1 payment, made last, leads.
    expect(res.body.addresses[0].ownerId).toBe(paid[1]!.chargeId);
    const one1 = await api("GET", "/console/x402/receiving-addresses?limit=1", { token: await consoleToken() });
    expect(one1.body.addresses.map((a: { ownerId: string }) => a.ownerId)).toEqual([paid[1]!.chargeId]);
  });

  const FAULTS: ["ledger.before_batch" | "ledger.after_batch", FaultMode, "alarm" | "cron"][] = [
    ["ledger.before_batch", "throw", "alarm"],
    ["ledger.before_batch", "abort", "cron"],
    ["ledger.after_batch", "throw", "cron"],
    ["ledger.after_batch", "abort", "alarm"],
  ];
  for (const [point, mode, how] of FAULTS) {
    it(`a settlement on shard 1 whose recording fails at ${point} (${mode}) is credited once by the ${how}`, async () => {
      const { merchant, chargeId } = await chargeOn(1);
      const payer = await freshPayer(VALUE);
      const before = await homeBalance("merchant", merchant.merchantId);
      const { header, payload } = await xPaymentFor(x402Path(chargeId), payer.key, VALUE);
      const struck = injectOnce(point, mode);
      const res = await pay(chargeId, header);
      expect(struck()).toBe(true);
      setFaultHook(null);
      // The money moved on chain: never a fresh 402, the client is sent to the settlement.
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      const settlementId = res.body.settlement.settlementId as string;
      expect(shardOfId(settlementId)).toBe(1);
      expect(res.headers.get("location")).toBe(`/x402/settlements/${settlementId}`);
      expect(await tokenBalance(payload.authorization.to as Hex)).toBe(VALUE);
      const [row] = await paymentsIn(1, chargeId);
      if (point === "ledger.before_batch") {
        // Nothing of the credit was written: the payment is left to the chain, the charge still claimed.
        expect(row).toMatchObject({ id: settlementId, status: "unknown" });
        expect(await chargeOf(chargeId)).toMatchObject({ status: "pending" });
        expect(await homeBalance("merchant", merchant.merchantId)).toBe(before);
        expect((await api("GET", `/x402/settlements/${settlementId}`)).body.status).toBe("pending");
      }
      if (how === "alarm") {
        const settler = settlerOf(env);
        const watched = await runInDurableObject(settler, async (_i, state) => [
          ...(await state.storage.list({ prefix: "pending:" })).keys(),
        ]);
        expect(watched).toContain(`pending:${settlementId}`);
        expect(await runDurableObjectAlarm(settler)).toBe(true);
      } else {
        await reconcileOpenPayments(env);
      }
      await expectPaidOnce(chargeId, merchant.merchantId, payload.authorization.to as Hex, before);
      expect((await api("GET", `/x402/settlements/${settlementId}`)).body).toMatchObject({ status: "settled" });
      // Reconciling again changes nothing.
      await reconcileOpenPayments(env);
      if (how === "alarm") await runDurableObjectAlarm(settlerOf(env));
      expect(await homeBalance("merchant", merchant.merchantId)).toBe(before + CENTS);
      expect(await chargePaidRows(chargeId)).toHaveLength(1);
      await expectShardsAtRest();
    });
  }
});

describe("x402 on a checkout link of a shard-1 merchant", () => {
  it("finds the link in its merchant's shard and pays it there once; a token of a shard not run here is 404", async () => {
    const merchant = await shopOn(1);
    const link = await createCheckoutLink(merchant.apiKey, CENTS);
    expect(shardOfId(link.checkoutLinkId)).toBe(1);
    const path = `/checkout/${link.checkoutToken}/x402`;
    const terms = await api("GET", path);
    expect(terms.status).toBe(402);
    const payer = await freshPayer(VALUE);
    const before = await homeBalance("merchant", merchant.merchantId);
    const { header } = await xPaymentFor(path, payer.key, VALUE);
    const res = await api("GET", path, { headers: { "X-PAYMENT": header } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const chargeId = res.body.chargeId as string;
    expect(shardOfId(chargeId)).toBe(1);
    expect(await chargeOf(chargeId)).toMatchObject({ status: "paid", method: "x402" });
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(before + CENTS);
    expect((await paymentsIn(1, chargeId)).filter((r) => r.status === "settled")).toHaveLength(1);
    expect(await paymentsIn(0, chargeId)).toEqual([]);
    // The same authorization again pays nothing more.
    const again = await api("GET", path, { headers: { "X-PAYMENT": header } });
    expect(again.status).not.toBe(500);
    expect(await homeBalance("merchant", merchant.merchantId)).toBe(before + CENTS);

    const forged = link.checkoutToken.replace(/_s1_/i, (m) => m.replace("1", "7"));
    expect(forged).not.toBe(link.checkoutToken);
    expect((await api("GET", `/checkout/${forged}/x402`)).status).toBe(404);
    await expectShardsAtRest();
  });
});
