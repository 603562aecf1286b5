import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { PolicyInput } from "../../src/agents/policy";
import { readAgentState } from "../../src/agents/wallet-state";
import { type PayableCharge, walletPaymentPlan } from "../../src/ledger/movements";
import { placementOf } from "../../src/ledger/place";
import { newId } from "../../src/lib/ids";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createMerchant, creditAgent, payCharge } from "../helpers/factories";
import { creditBaseUnits, pendingBelowACent } from "../helpers/sub-cent";

/*
 * The wallet counts exact amounts: its balance, the day's spend and what payments in flight hold are
 * base units (1 cent = 10,000), and the policy's limits, stated in cents, are compared as cents x
 * 10,000 with them. Charges below or between cents are written as a facilitator's unsettled payment
 * leaves one (test/helpers/sub-cent.ts).
 */

/** A merchant, an agent with `policy` holding `baseUnits` exactly, and the agent's home. */
async function walletWith(baseUnits: bigint, policy?: PolicyInput) {
  const merchant = await createMerchant({ name: "Per Call" });
  const agent = await createAgent(policy ? { policy } : {});
  if (baseUnits > 0n) await creditBaseUnits(agent.agentId, baseUnits);
  const home = await placementOf(env).ofAgent(agent.agentId);
  return { merchant, agent, home };
}

/** The agent's balance as `GET /balance` states it exactly. */
async function exactBalance(agentKey: string): Promise<string> {
  const res = await api("GET", "/balance", { token: agentKey });
  expect(res.status).toBe(200);
  return res.body.balanceBaseUnits as string;
}

/** An owner's balance row, in base units as text. */
const balanceRow = async (db: D1Database, table: "agents" | "merchants", id: string) =>
  (await db
    .prepare(`SELECT CAST(balance_base_units AS TEXT) AS v FROM ${table} WHERE id = ?`)
    .bind(id)
    .first<{ v: string }>())!.v;

/** Every ledger entry of the database, summed in base units: zero. */
const ledgerSum = async (db: D1Database) =>
  (await db.prepare("SELECT CAST(COALESCE(SUM(amount_base_units), 0) AS TEXT) AS v FROM ledger_entries").first<{
    v: string;
  }>())!.v;

const payExpecting = async (agentKey: string, chargeId: string, status: number, error?: string) => {
  const res = await payCharge(agentKey, chargeId);
  expect({ status: res.status, error: res.body?.error }).toEqual({ status, error });
  return res;
};

describe("a wallet pays amounts below a cent exactly", () => {
  it("debits the exact amount: the answer, the ledger batch, the audit row and the events state it unrounded", async () => {
    const { merchant, agent, home } = await walletWith(25_000n);
    const chargeId = await pendingBelowACent(merchant.merchantId, 1_500n);
    const res = await payExpecting(agent.apiKey, chargeId, 200);
    expect(res.body.paid).toBe(true);
    expect(res.body.charge).toMatchObject({
      chargeId,
      status: "paid",
      method: "ledger",
      agentId: agent.agentId,
      amountMinor: null,
      amountBaseUnits: "1500",
    });
    // A balance in cents is rounded down, as every balance is: 1,500 base units are 0 whole cents.
    expect(res.body.merchantBalanceMinor).toBe(0);
    expect(await exactBalance(agent.apiKey)).toBe("23500");
    expect(await balanceRow(home.db, "merchants", merchant.merchantId)).toBe("1500");

    const reference = res.body.charge.reference as string;
    const entries = await home.db
      .prepare("SELECT account, amount_base_units AS units FROM ledger_entries WHERE transfer_id = ? ORDER BY units")
      .bind(reference)
      .all<{ account: string; units: number }>();
    expect(entries.results).toEqual([
      { account: `agent:${agent.agentId}`, units: -1_500 },
      { account: `merchant:${merchant.merchantId}`, units: 1_500 },
    ]);
    const audit = await home.db
      .prepare("SELECT amount_base_units AS units FROM audit_events WHERE charge_id = ? AND type = 'charge.paid'")
      .bind(chargeId)
      .all<{ units: string }>();
    expect(audit.results).toEqual([{ units: "1500" }]);
    const events = await home.db
      .prepare("SELECT type, data FROM outbox_events WHERE json_extract(data, '$.chargeId') = ? ORDER BY type")
      .bind(chargeId)
      .all<{ type: string; data: string }>();
    const paidEvents = events.results.filter((e) => e.type.endsWith(".succeeded"));
    expect(paidEvents.map((e) => e.type)).toEqual(["charge.succeeded", "payment.succeeded"]);
    for (const e of paidEvents)
      expect(JSON.parse(e.data)).toMatchObject({ amountMinor: null, amountBaseUnits: "1500" });

    const charge = await api("GET", `/charges/${chargeId}`);
    expect(charge.body).toMatchObject({ status: "paid", amountMinor: null, amountBaseUnits: "1500" });
    expect(await ledgerSum(home.db)).toBe("0");
  });

  it("pays a balance to the base unit: 5,000 base units pay a charge of 5,000, not one of 5,001", async () => {
    const { merchant, agent } = await walletWith(5_000n);
    const over = await pendingBelowACent(merchant.merchantId, 5_001n);
    await payExpecting(agent.apiKey, over, 402, "saldo_insuficiente");
    expect(await exactBalance(agent.apiKey)).toBe("5000");
    const exact = await pendingBelowACent(merchant.merchantId, 5_000n);
    await payExpecting(agent.apiKey, exact, 200);
    expect(await exactBalance(agent.apiKey)).toBe("0");
    // Refused in the policy, and in the batch on its own: the ledger guards the exact balance.
    const again = await pendingBelowACent(merchant.merchantId, 1n);
    await payExpecting(agent.apiKey, again, 402, "saldo_insuficiente");
  });

  it("the batch itself refuses an amount above the exact balance, as a refusal, not a failed write", async () => {
    const { merchant, agent, home } = await walletWith(5_000n);
    const chargeId = await pendingBelowACent(merchant.merchantId, 5_001n);
    const row = await home.db
      .prepare(
        "SELECT id, merchant_id AS merchantId, amount_minor AS amountMinor, amount_base_units AS amountBaseUnits, currency, description, checkout_link_id AS checkoutLinkId FROM charges WHERE id = ?",
      )
      .bind(chargeId)
      .first<PayableCharge>();
    const plan = walletPaymentPlan({
      charge: row!,
      agentId: agent.agentId,
      method: "ledger",
      reference: newId("payment", home),
      paidAt: new Date().toISOString(),
    });
    // Its whole cents (0) would pass a guard in cents; the exact amount does not.
    expect(await home.commit(plan)).toEqual({ kind: "refused", reason: "saldo_insuficiente" });
    expect(await balanceRow(home.db, "agents", agent.agentId)).toBe("5000");
  });

  it("ten payments of $0.001 add exactly 1 cent to the day's spend: a daily limit of 1 cent refuses the 11th", async () => {
    const { merchant, agent } = await walletWith(0n, { dailyLimitUsdCents: 1 });
    await creditAgent(agent.agentId, 5);
    for (let i = 0; i < 10; i++)
      await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 1_000n), 200);
    const eleventh = await pendingBelowACent(merchant.merchantId, 1_000n);
    // On the wallet object's remembered figures.
    await payExpecting(agent.apiKey, eleventh, 402, "excede_limite_diario");
    // And on the day's spend as D1 sums it (a credit makes the object read it again).
    expect((await readAgentState(env, agent.agentId, Date.now()))?.spentTodayBaseUnits).toBe(10_000n);
    await creditAgent(agent.agentId, 1);
    await payExpecting(agent.apiKey, eleventh, 402, "excede_limite_diario");
    expect(await exactBalance(agent.apiKey)).toBe(String(6n * 10_000n - 10_000n));
  });

  it("a daily limit counts the exact sum, not each payment's whole cents", async () => {
    const { merchant, agent } = await walletWith(100_000n, { dailyLimitUsdCents: 2 });
    // 15,000 + 5,000 = 2 cents exactly: allowed; one base unit more is not.
    await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 15_000n), 200);
    await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 5_001n), 402, "excede_limite_diario");
    await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 5_000n), 200);
    await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 1n), 402, "excede_limite_diario");
  });

  it("a per-transaction cap of 1 cent allows 10,000 base units and refuses 10,001", async () => {
    const { merchant, agent } = await walletWith(100_000n, { maxPerTransactionUsdCents: 1 });
    const over = await pendingBelowACent(merchant.merchantId, 10_001n);
    await payExpecting(agent.apiKey, over, 402, "excede_tope_por_transaccion");
    await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 10_000n), 200);
    expect(await exactBalance(agent.apiKey)).toBe("90000");
  });

  it("an approval threshold of 1 cent holds 10,001 base units, and the approval states the exact amount", async () => {
    const { merchant, agent } = await walletWith(100_000n, { approvalThresholdUsdCents: 1 });
    await payExpecting(agent.apiKey, await pendingBelowACent(merchant.merchantId, 10_000n), 200);
    const heldCharge = await pendingBelowACent(merchant.merchantId, 10_001n);
    const held = await payCharge(agent.apiKey, heldCharge);
    expect(held.status).toBe(402);
    expect(held.body).toMatchObject({ pendingApproval: true, reason: "requiere_aprobacion_humana" });
    expect(held.body.charge).toMatchObject({ amountMinor: null, amountBaseUnits: "10001", status: "pending" });
    const approvalId = held.body.approvalId as string;

    const token = await consoleToken();
    const list = await api("GET", "/console/approvals?status=pending", { token });
    expect(list.status).toBe(200);
    const listed = (list.body.approvals as Record<string, unknown>[]).find((a) => a.approvalId === approvalId);
    expect(listed).toMatchObject({ chargeId: heldCharge, amountMinor: null, amountBaseUnits: "10001" });
    const home = await placementOf(env).ofAgent(agent.agentId);
    const event = await home.db
      .prepare(
        "SELECT data FROM outbox_events WHERE type = 'approval.required' AND json_extract(data, '$.approvalId') = ?",
      )
      .bind(approvalId)
      .first<{ data: string }>();
    expect(JSON.parse(event!.data)).toMatchObject({ amountMinor: null, amountBaseUnits: "10001" });

    const granted = await api("POST", `/approvals/${approvalId}/grant`, { token });
    expect(granted.status).toBe(200);
    expect(granted.body.charge).toMatchObject({ status: "paid", amountMinor: null, amountBaseUnits: "10001" });
    expect(await exactBalance(agent.apiKey)).toBe(String(100_000 - 10_000 - 10_001));
  });

  it("a whole-cent approval states its cents with exactly the fields it always had", async () => {
    const { merchant, agent } = await walletWith(100_000n, { approvalThresholdUsdCents: 1 });
    const held = await payCharge(agent.apiKey, await pendingBelowACent(merchant.merchantId, 20_000n));
    expect(held.status).toBe(402);
    const list = await api("GET", "/console/approvals?status=pending", { token: await consoleToken() });
    const listed = (list.body.approvals as Record<string, unknown>[]).find(
      (a) => a.approvalId === held.body.approvalId,
    );
    expect(listed).toMatchObject({ amountMinor: 2 });
    expect(listed).not.toHaveProperty("amountBaseUnits");
  });

  it("concurrent payments below a cent pay exactly as many as the balance covers, never overdrawing", async () => {
    const n = 20;
    const price = 1_500n;
    // 1 cent covers six payments of 1,500 base units (9,000), leaving 1,000.
    const { merchant, agent, home } = await walletWith(10_000n);
    const charges = await Promise.all(Array.from({ length: n }, () => pendingBelowACent(merchant.merchantId, price)));
    const answers = await Promise.all(charges.map((id) => payCharge(agent.apiKey, id)));
    const paid = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status === 402);
    expect(paid).toHaveLength(6);
    expect(refused).toHaveLength(n - 6);
    for (const r of refused) expect(r.body.error).toBe("saldo_insuficiente");
    expect(await exactBalance(agent.apiKey)).toBe("1000");
    expect(await balanceRow(home.db, "merchants", merchant.merchantId)).toBe(String(6n * price));
    const paidRows = await home.db
      .prepare(
        `SELECT COUNT(*) AS n, CAST(COALESCE(SUM(amount_base_units), 0) AS TEXT) AS units FROM charges
         WHERE merchant_id = ? AND status = 'paid' AND agent_id = ?`,
      )
      .bind(merchant.merchantId, agent.agentId)
      .first<{ n: number; units: string }>();
    expect(paidRows).toEqual({ n: 6, units: "9000" });
    const negative = await home.db
      .prepare("SELECT COUNT(*) AS n FROM agents WHERE balance_base_units < 0")
      .first<{ n: number }>();
    expect(negative!.n).toBe(0);
    const agentEntries = await home.db
      .prepare("SELECT CAST(SUM(amount_base_units) AS TEXT) AS v FROM ledger_entries WHERE account = ?")
      .bind(`agent:${agent.agentId}`)
      .first<{ v: string }>();
    expect(agentEntries!.v).toBe("1000");
    expect(await ledgerSum(home.db)).toBe("0");
    const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
    expect(verify.body.ok).toBe(true);
  });
});
