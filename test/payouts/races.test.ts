import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { merchantBalance } from "../helpers/factories";
import { tokenBalance } from "../helpers/x402";
import { fundedMerchant, merchantLedger, outboxEventsOf, settled, transfersTo } from "./fixtures";

const UNITS_PER_CENT = 10_000n;

describe("payouts under concurrency", () => {
  it("20 payouts at once against a balance that covers 5: exactly 5 are taken, paid, and on chain once each", async () => {
    const cents = 300;
    const m = await fundedMerchant(5 * cents);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: cents } }),
      ),
    );
    const taken = answers.filter((a) => a.status === 201);
    expect(taken).toHaveLength(5);
    for (const refused of answers.filter((a) => a.status !== 201))
      expect([refused.status, refused.body]).toEqual([409, { error: "saldo_insuficiente" }]);
    // Each debit saw the one before it: the balances after them are 4, 3, 2, 1 and 0 payouts, never below zero.
    expect(taken.map((a) => a.body.balanceMinor).sort((a, b) => a - b)).toEqual([0, 300, 600, 900, 1200]);
    expect(await merchantBalance(m.apiKey)).toBe(0);
    expect(await merchantLedger(m.merchantId)).toEqual({ cached: 0, entries: 0 });

    const ids = taken.map((a) => a.body.payout.payoutId as string);
    expect(new Set(ids).size).toBe(5);
    const paid = await Promise.all(ids.map((id) => settled(m.apiKey, id)));
    for (const p of paid) expect(p).toMatchObject({ status: "paid", amountMinor: cents, failureReason: null });
    const onChain = await transfersTo(m.address);
    expect(onChain).toHaveLength(5);
    expect(onChain.every((t) => t.value === BigInt(cents) * UNITS_PER_CENT)).toBe(true);
    expect(new Set(onChain.map((t) => t.transaction))).toEqual(new Set(paid.map((p) => p.transaction)));
    expect(await tokenBalance(m.address)).toBe(5n * BigInt(cents) * UNITS_PER_CENT);
    const list = await api("GET", "/merchant/payouts?limit=100", { token: m.apiKey });
    expect(list.body.payouts).toHaveLength(5);
    for (const id of ids) expect(await outboxEventsOf("payout.paid", id)).toBe(1);
  });

  it("one Idempotency-Key sent 10 times at once: one payout, one transfer, identical answers", async () => {
    const m = await fundedMerchant(1_000);
    const headers = { "Idempotency-Key": `payout-race-${crypto.randomUUID()}` };
    const send = () => api("POST", "/merchant/payouts", { token: m.apiKey, headers, body: { amountUsdCents: 400 } });
    const answers = await Promise.all(Array.from({ length: 10 }, send));
    const created = answers.filter((a) => a.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    // The first answer and any replay of it are the same bytes.
    expect(new Set(created.map((a) => a.text)).size).toBe(1);
    for (const other of answers.filter((a) => a.status !== 201))
      expect([other.status, other.body]).toEqual([409, { error: "idempotency_key_in_use" }]);
    const first = created[0]!.body;
    expect(first).toMatchObject({ balanceMinor: 600, payout: { amountMinor: 400, status: "pending" } });

    const list = await api("GET", "/merchant/payouts", { token: m.apiKey });
    expect(list.body.payouts.map((p: { payoutId: string }) => p.payoutId)).toEqual([first.payout.payoutId]);
    expect(await merchantBalance(m.apiKey)).toBe(600);
    const paid = await settled(m.apiKey, first.payout.payoutId);
    expect(paid.status).toBe("paid");
    expect(await transfersTo(m.address)).toEqual([{ transaction: paid.transaction, value: 400n * UNITS_PER_CENT }]);

    const later = await send();
    expect(later.status).toBe(201);
    expect(later.headers.get("idempotent-replayed")).toBe("true");
    expect(later.text).toBe(created[0]!.text);
    expect(await merchantBalance(m.apiKey)).toBe(600);
    expect((await api("GET", "/merchant/payouts", { token: m.apiKey })).body.payouts).toHaveLength(1);
    expect(await transfersTo(m.address)).toHaveLength(1);
    expect(await merchantLedger(m.merchantId)).toEqual({ cached: 600, entries: 600 });
  });
});
