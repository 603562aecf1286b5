import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { balanceOf, merchantBalance } from "../helpers/factories";
import { paidCharge, refund, refundsOf } from "../helpers/money-out";

/*
 * Refunds under concurrency: the batch decides (the charge's remaining amount, the merchant's
 * balance, the Idempotency-Key), so requests that race never take more than there is.
 */

describe("refunds racing", () => {
  it("10 refunds of 30 cents at once on a 100-cent charge: exactly 3 succeed, balances consistent", async () => {
    const { merchant, agent, chargeId } = await paidCharge(100);
    const results = await Promise.all(
      Array.from({ length: 10 }, () => refund(merchant.apiKey, chargeId, { amountUsdCents: 30 })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 409, 409, 409, 409, 409, 409, 409]);
    for (const r of results.filter((r) => r.status === 409))
      expect(r.body).toEqual({ error: "refund_exceeds_remaining" });
    // Each answer names the charge's refunded sum right after its own refund: 30, 60 and 90, in some order.
    expect(
      results
        .filter((r) => r.status === 201)
        .map((r) => r.body.charge.refundedMinor)
        .sort(),
    ).toEqual([30, 60, 90]);
    expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(90);
    expect(await refundsOf(merchant.apiKey, chargeId)).toHaveLength(3);
    expect(await merchantBalance(merchant.apiKey)).toBe(10);
    expect(await balanceOf(agent.apiKey)).toBe(90);
  });

  it("a refund racing a payout of the same merchant: the balance covers one, exactly one is taken", async () => {
    for (let round = 0; round < 3; round++) {
      const { merchant, agent, chargeId } = await paidCharge(100);
      const address = privateKeyToAccount(generatePrivateKey()).address;
      await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } });
      const [refunded, paidOut] = await Promise.all([
        refund(merchant.apiKey, chargeId, { amountUsdCents: 100 }),
        api("POST", "/merchant/payouts", { token: merchant.apiKey, body: { amountUsdCents: 100 } }),
      ]);
      expect([refunded!.status, paidOut!.status].sort()).toEqual([201, 409]);
      const loser = refunded!.status === 409 ? refunded! : paidOut!;
      expect(loser.body).toEqual({ error: "saldo_insuficiente" });
      expect(await merchantBalance(merchant.apiKey)).toBe(0);
      expect(await balanceOf(agent.apiKey)).toBe(refunded!.status === 201 ? 100 : 0);
      expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(refunded!.status === 201 ? 100 : 0);
      expect(await refundsOf(merchant.apiKey, chargeId)).toHaveLength(refunded!.status === 201 ? 1 : 0);
    }
  });

  it("the same Idempotency-Key 5 times at once makes one refund; a later retry replays its answer", async () => {
    const { merchant, agent, chargeId } = await paidCharge(500);
    const key = `refund-${crypto.randomUUID()}`;
    const send = () => refund(merchant.apiKey, chargeId, { amountUsdCents: 120 }, { "Idempotency-Key": key });
    const results = await Promise.all(Array.from({ length: 5 }, send));
    const created = results.filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const r of results.filter((r) => r.status !== 201)) {
      expect(r.status).toBe(409);
      expect(r.body).toEqual({ error: "idempotency_key_in_use" });
    }
    const refunds = await refundsOf(merchant.apiKey, chargeId);
    expect(refunds).toHaveLength(1);
    for (const r of created) expect(r.body.refund.refundId).toBe(refunds[0]!.refundId);

    const replay = await send();
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(created[0]!.body);
    expect(replay.body.charge.refundedMinor).toBe(120);
    expect(await refundsOf(merchant.apiKey, chargeId)).toHaveLength(1);
    expect(await merchantBalance(merchant.apiKey)).toBe(380);
    expect(await balanceOf(agent.apiKey)).toBe(120);
  });
});
