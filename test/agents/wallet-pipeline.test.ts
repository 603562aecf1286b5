import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { walletOf } from "../../src/agents/wallet.do";
import { newPendingCharge } from "../../src/charges/service";
import { guard } from "../../src/db/statements";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { CONTROL_IDS } from "../../src/lib/ids";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";

/*
 * A wallet object ends a payment's turn once its batch is handed to the
 * ledger (issue 8: one hot agent). What is in flight is held back from the
 * next decisions (src/lib/held-figures.ts); a decision that a hold alone would
 * refuse waits for the batches in flight and is made again, and anything that
 * reads the agent from D1 waits for them first. The answers are those of a
 * strictly one-at-a-time wallet.
 */
const pendingCharge = (merchantId: string, amountMinor: number) => ({
  ...newPendingCharge(CONTROL_IDS, merchantId, { amountMinor, description: "pipeline test" }),
  merchantName: "Acme Data",
  merchantCategory: null,
});

describe("one agent's payments in flight together", () => {
  it("are decided while earlier ones commit, share the ledger's batches, and never spend a cent twice", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const charges = await Promise.all(Array.from({ length: 12 }, () => createCharge(merchant.apiKey, 100)));
    const ledger = ledgerOf(env, 0);
    const before = await ledger.stats();
    const responses = await Promise.all(charges.map((c) => payCharge(agent.apiKey, c.chargeId)));
    const after = await ledger.stats();
    expect(responses.filter((r) => r.status === 200)).toHaveLength(10);
    expect(responses.filter((r) => r.status === 402).map((r) => r.body.error)).toEqual([
      "saldo_insuficiente",
      "saldo_insuficiente",
    ]);
    // The two refused were refused by the wallet's decision: only the ten payments reached the ledger.
    expect(after.plans - before.plans).toBe(10);
    // One at a time, every payment would have been its own batch.
    expect(after.batches - before.batches).toBeLessThan(10);
    expect(await balanceOf(agent.apiKey)).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(1000);
  });

  it("a payment refused in flight does not refuse a later one that needed the money it held", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 200 });
    // Warm the object's figures (balance 100 after this), so both decisions below are made from memory.
    expect((await payCharge(agent.apiKey, (await createCharge(merchant.apiKey, 100)).chargeId)).status).toBe(200);
    const wallet = walletOf(env, agent.agentId);
    // The first is decided (holding 100) and handed over; its batch is then refused by a guard (a
    // known 409 code: guard reasons are answered to clients, so only codes of the closed list pass).
    const refusedInFlight = wallet.payNewCharge(agent.agentId, {
      charge: pendingCharge(merchant.merchantId, 100),
      birthGuards: [guard("charge_not_pending", "0")],
      view: { kind: "checkout" },
    });
    // Decided while the first is in flight: the hold leaves nothing, so it waits for that batch and decides again.
    const later = wallet.payNewCharge(agent.agentId, {
      charge: pendingCharge(merchant.merchantId, 100),
      birthGuards: [],
      view: { kind: "checkout" },
    });
    expect(await refusedInFlight).toEqual({ kind: "conflict", reason: "charge_not_pending" });
    expect((await later).kind).toBe("paid");
    expect(await balanceOf(agent.apiKey)).toBe(0);
  });

  it("granting an approval waits for the agent's payments in flight before it reads the day's spend", async () => {
    const token = await consoleToken();
    const merchant = await createMerchant();
    const agent = await createAgent({
      credit: 1000,
      policy: { dailyLimitUsdCents: 120, approvalThresholdUsdCents: 50 },
    });
    const held = await createCharge(merchant.apiKey, 100);
    const hold = await payCharge(agent.apiKey, held.chargeId);
    expect(hold.status).toBe(402);
    const approvalId = hold.body.approvalId as string;
    const small = await createCharge(merchant.apiKey, 40);
    const wallet = walletOf(env, agent.agentId);
    // 40 is paid (under the threshold) and in flight when the grant is decided: 40 + 100 passes the daily 120.
    const paying = wallet.payCharge(agent.agentId, small.chargeId);
    const granting = wallet.grantApproval(agent.agentId, approvalId, "ops@example.com");
    expect((await paying).kind).toBe("paid");
    expect(await granting).toEqual({ kind: "rejected", reason: "excede_limite_diario" });
    expect(await balanceOf(agent.apiKey)).toBe(960);
    const approval = await api("GET", "/console/approvals?status=pending", { token });
    expect(approval.status).toBe(200);
    expect(JSON.stringify(approval.body)).toContain(approvalId);
  });
});
