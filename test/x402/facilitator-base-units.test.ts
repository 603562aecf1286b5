import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { chargesOf, facilitatorTerms, settle, v1Request, v2Request } from "../helpers/facilitator";
import { createMerchant } from "../helpers/factories";
import { freshPayer, tokenBalance } from "../helpers/x402";

/*
 * Pay-per-call prices below a cent, settled through the service as a merchant's facilitator: the
 * charge and the merchant's balance are exact to the token's base unit.
 */

/** The merchant's balance as GET /merchant/me states it: in whole cents and exactly, in base units. */
const merchantMoney = async (key: string) => {
  const res = await api("GET", "/merchant/me", { token: key });
  expect(res.status).toBe(200);
  return { minor: res.body.merchant.balanceMinor as number, baseUnits: BigInt(res.body.merchant.balanceBaseUnits) };
};

describe("amounts below a cent", () => {
  it("a $0.001 payment is a charge of exactly 1000 base units and credits exactly that", async () => {
    const merchant = await createMerchant({ name: "Tenth Of A Cent Shop" });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(1_000_000n);
    const before = await merchantMoney(merchant.apiKey);
    const body = await v2Request(payer.key, terms, { value: 1000n, resource: "https://api.tiny.example/call" });
    const settled = await settle(merchant.apiKey, body);
    expect(settled.body, settled.text).toMatchObject({ success: true });
    const [charge] = await chargesOf(merchant.apiKey);
    expect(charge).toMatchObject({ amountBaseUnits: "1000", amountMinor: null, method: "x402", status: "paid" });
    expect(await merchantMoney(merchant.apiKey)).toEqual({
      minor: before.minor,
      baseUnits: before.baseUnits + 1000n,
    });
    expect(await tokenBalance(payer.address)).toBe(1_000_000n - 1000n);
    // The audit row and the events state the exact amount, never a rounded one.
    const audit = await env.DB.prepare(
      "SELECT amount_minor AS minor, amount_base_units AS baseUnits FROM audit_events WHERE charge_id = ? AND type = 'charge.paid'",
    )
      .bind(charge!.chargeId)
      .first<{ minor: number; baseUnits: string }>();
    expect(audit).toEqual({ minor: 0, baseUnits: "1000" });
    const events = await env.DB.prepare(
      "SELECT type, data FROM outbox_events WHERE json_extract(data, '$.chargeId') = ?",
    )
      .bind(charge!.chargeId)
      .all<{ type: string; data: string }>();
    expect(events.results.map((e) => e.type).sort()).toEqual(["charge.created", "charge.succeeded"]);
    for (const e of events.results)
      expect(JSON.parse(e.data)).toMatchObject({ amountMinor: null, amountBaseUnits: "1000" });
  });

  it("ten of them, in both versions, make exactly one cent", async () => {
    const merchant = await createMerchant({ name: "Ten Calls Shop" });
    const terms = await facilitatorTerms(merchant.apiKey);
    const payer = await freshPayer(1_000_000n);
    for (let i = 0; i < 10; i++) {
      const build = i % 2 === 0 ? v2Request : v1Request;
      const body = await build(payer.key, terms, { value: 1000n, resource: `https://api.tiny.example/call/${i}` });
      expect((await settle(merchant.apiKey, body)).body.success).toBe(true);
    }
    expect(await merchantMoney(merchant.apiKey)).toEqual({ minor: 1, baseUnits: 10_000n });
    expect((await chargesOf(merchant.apiKey)).every((c) => c.amountBaseUnits === "1000")).toBe(true);
  });
});
