import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { ApiError } from "../../src/lib/errors";
import { treasuryOf } from "../../src/payouts/service";
import { api, consoleToken } from "../helpers/api";
import { createMerchant, merchantBalance } from "../helpers/factories";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { tokenBalance } from "../helpers/x402";
import { fundedMerchant, settled } from "./fixtures";

describe("payouts", () => {
  it("debits at once, sends the tokens to the payout address and reports payout.paid", async () => {
    const m = await fundedMerchant(1_250);
    await registerEndpoint("payout-paid", { merchantId: m.merchantId });
    const res = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 1_000 } });
    expect(res.status).toBe(201);
    expect(res.body.balanceMinor).toBe(250);
    expect(res.body.payout).toMatchObject({
      merchantId: m.merchantId,
      amountMinor: 1_000,
      currency: "USD",
      destination: m.address.toLowerCase(),
      status: "pending",
      transaction: null,
      failureReason: null,
      paidAt: null,
    });
    expect(res.body.payout.payoutId).toMatch(/^po_/);
    const paid = await settled(m.apiKey, res.body.payout.payoutId);
    expect(paid.status).toBe("paid");
    expect(paid.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(paid.paidAt).not.toBeNull();
    expect(await tokenBalance(m.address)).toBe(1_000n * 10_000n);
    expect(await merchantBalance(m.apiKey)).toBe(250);
    const [delivery] = await waitForReceived("payout-paid", (list) =>
      list.some((d) => JSON.parse(d.body).type === "payout.paid"),
    );
    const event = JSON.parse(delivery!.body);
    expect(event.data).toEqual({
      payoutId: paid.payoutId,
      merchantId: m.merchantId,
      amountMinor: 1_000,
      currency: "USD",
      destination: m.address.toLowerCase(),
      transaction: paid.transaction,
      failureReason: null,
    });
  });

  it("pays out the whole balance without an amount, then refuses a zero balance", async () => {
    const m = await fundedMerchant(777);
    const res = await api("POST", "/merchant/payouts", { token: m.apiKey });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ balanceMinor: 0, payout: { amountMinor: 777 } });
    await settled(m.apiKey, res.body.payout.payoutId);
    const again = await api("POST", "/merchant/payouts", { token: m.apiKey });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: "saldo_insuficiente" });
  });

  it("refuses without a payout address, above the balance and bad amounts, debiting nothing", async () => {
    const merchant = await createMerchant();
    const none = await api("POST", "/merchant/payouts", { token: merchant.apiKey, body: { amountUsdCents: 1 } });
    expect(none.status).toBe(409);
    expect(none.body).toEqual({ error: "payout_address_missing" });
    const m = await fundedMerchant(500);
    const over = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 501 } });
    expect(over.status).toBe(409);
    expect(over.body).toEqual({ error: "saldo_insuficiente" });
    for (const amountUsdCents of [0, -5, 1.5, "10"]) {
      const bad = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents } });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe("invalid_request");
    }
    expect(await merchantBalance(m.apiKey)).toBe(500);
    const list = await api("GET", "/merchant/payouts", { token: m.apiKey });
    expect(list.body).toEqual({ payouts: [] });
  });

  it("screens the payout address again: blocklisted after it was set, 403 and nothing debited", async () => {
    const m = await fundedMerchant(300);
    const block = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: m.address, reason: "test" },
    });
    expect(block.status).toBe(201);
    const res = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: 100 } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "payout_address_flagged", verdict: "block", reason: "operator_blocklist" });
    expect(await merchantBalance(m.apiKey)).toBe(300);
  });

  it("keeps payouts to their merchant: another's id is 404; the console lists all by status", async () => {
    const a = await fundedMerchant(200);
    const b = await createMerchant();
    const res = await api("POST", "/merchant/payouts", { token: a.apiKey, body: { amountUsdCents: 200 } });
    const id = res.body.payout.payoutId;
    const other = await api("GET", `/merchant/payouts/${id}`, { token: b.apiKey });
    expect(other.status).toBe(404);
    expect(other.body).toEqual({ error: "payout_not_found" });
    await settled(a.apiKey, id);
    const token = await consoleToken();
    const paid = await api("GET", "/console/payouts?status=paid&limit=100", { token });
    expect(paid.status).toBe(200);
    expect(paid.body.payouts.some((p: { payoutId: string }) => p.payoutId === id)).toBe(true);
    expect(paid.body.payouts.every((p: { status: string }) => p.status === "paid")).toBe(true);
    const failed = await api("GET", "/console/payouts?status=failed&limit=100", { token });
    expect(failed.body.payouts.some((p: { payoutId: string }) => p.payoutId === id)).toBe(false);
    expect((await api("GET", "/console/payouts?status=lost", { token })).status).toBe(400);
  });

  it("a deployment without the settlement key or a gas key takes no payout: 503 treasury_not_configured", () => {
    const x = settingsOf(env).x402!;
    expect(treasuryOf(x)).toBe(x);
    for (const missing of [null, { ...x, settlementPrivateKey: null }, { ...x, facilitatorPrivateKeys: [] }]) {
      let refused: unknown;
      try {
        treasuryOf(missing);
      } catch (error) {
        refused = error;
      }
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused).toMatchObject({ status: 503, error: "treasury_not_configured" });
    }
  });
});
