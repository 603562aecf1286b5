import { describe, expect, it } from "vitest";
import { api } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";

describe("smoke", () => {
  it("a merchant charges and an agent pays from its wallet", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000 });
    const charge = await createCharge(merchant.apiKey, 1234, { description: "dataset" });
    const paid = await payCharge(agent.apiKey, charge.chargeId);
    expect(paid.status).toBe(200);
    expect(paid.body.paid).toBe(true);
    expect(paid.body.charge.status).toBe("paid");
    expect(paid.body.charge.reference).toMatch(/^PAY_/);
    expect(paid.body.merchantBalanceMinor).toBe(1234);
    expect(await balanceOf(agent.apiKey)).toBe(5000 - 1234);
    expect(await merchantBalance(merchant.apiKey)).toBe(1234);
    const again = await payCharge(agent.apiKey, charge.chargeId);
    expect(again.status).toBe(409);
    const pub = await api("GET", `/charges/${charge.chargeId}`);
    expect(pub.body.method).toBe("ledger");
  });
});
