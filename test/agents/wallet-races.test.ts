import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type ApiResponse, api, consoleToken } from "../helpers/api";
import { dispatchDirectly } from "../helpers/direct";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";

// Hundreds of requests: each goes straight into the fetch handler (test/helpers/direct.ts says why).
dispatchDirectly();

/**
 * Races on the wallet and ledger Durable Objects. D1 state persists across the
 * tests of this file, so every assertion is scoped to the objects a test
 * creates, except the global invariants (ledger sums to zero, chain verifies).
 */

const db = () => env.DB;

async function scalar<T = number>(sql: string, ...params: (string | number)[]): Promise<T> {
  const row = await db()
    .prepare(sql)
    .bind(...params)
    .first<{ v: T }>();
  return row!.v;
}

/** Invariants that must hold over the whole database after every scenario. */
async function expectGlobalInvariants() {
  const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(verify.status).toBe(200);
  expect(verify.body.ok).toBe(true);
  expect(await scalar("SELECT COALESCE(SUM(amount_base_units), 0) AS v FROM ledger_entries")).toBe(0);
  expect(await scalar("SELECT COUNT(*) AS v FROM agents WHERE balance_minor < 0")).toBe(0);
  expect(await scalar("SELECT COUNT(*) AS v FROM merchants WHERE balance_minor < 0")).toBe(0);
}

const countBy = (responses: ApiResponse[]) => {
  const counts: Record<string, number> = {};
  for (const r of responses) {
    const key = `${r.status}:${r.body?.pendingApproval ? "pendingApproval" : (r.body?.error ?? "ok")}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
};

const chargeRow = (chargeId: string) =>
  db()
    .prepare("SELECT status, agent_id AS agentId, reference, method FROM charges WHERE id = ?")
    .bind(chargeId)
    .first<{ status: string; agentId: string | null; reference: string | null; method: string | null }>();

const chargePaidAuditRows = (chargeId: string) =>
  scalar("SELECT COUNT(*) AS v FROM audit_events WHERE charge_id = ? AND type = 'charge.paid'", chargeId);

const ledgerSumOf = (account: string) =>
  scalar("SELECT COALESCE(SUM(amount_minor), 0) AS v FROM ledger_entries WHERE account = ?", account);

async function agentBalanceRow(agentId: string) {
  return scalar("SELECT balance_minor AS v FROM agents WHERE id = ?", agentId);
}

async function payToApproval(agentKey: string, chargeId: string): Promise<string> {
  const res = await payCharge(agentKey, chargeId);
  expect(res.status).toBe(402);
  expect(res.body.pendingApproval).toBe(true);
  return res.body.approvalId as string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const grant = async (approvalId: string) =>
  api("POST", `/approvals/${approvalId}/grant`, { token: await consoleToken() });
const reject = async (approvalId: string) =>
  api("POST", `/approvals/${approvalId}/reject`, { token: await consoleToken() });

describe("wallet races", () => {
  it("30 parallel pays of one charge by 10 agents: exactly one payment lands", async () => {
    const amount = 1_250;
    const merchant = await createMerchant({ name: "race-one-charge" });
    // Set-up is sequential: the race under test is the payment, not the registration (a separate test races that).
    const agents: { agentId: string; apiKey: string }[] = [];
    for (let i = 0; i < 10; i++) agents.push(await createAgent({ name: `racer-${i}`, credit: 10_000 }));
    const charge = await createCharge(merchant.apiKey, amount, { description: "contended" });
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const agentsBefore = await Promise.all(agents.map((a) => balanceOf(a.apiKey)));

    const requests = agents.flatMap((a) => [0, 1, 2].map(() => a));
    const responses = await Promise.all(requests.map((a) => payCharge(a.apiKey, charge.chargeId)));

    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(countBy(responses)).toEqual({ "200:ok": 1, "409:charge_not_pending": 29 });

    const winnerIndex = responses.findIndex((r) => r.status === 200);
    const winner = requests[winnerIndex]!;
    const won = responses[winnerIndex]!;
    expect(won.body.charge.status).toBe("paid");
    expect(won.body.charge.agentId).toBe(winner.agentId);
    expect(won.body.merchantBalanceMinor).toBe(merchantBefore + amount);

    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + amount);
    const agentsAfter = await Promise.all(agents.map((a) => balanceOf(a.apiKey)));
    const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
    expect(sum(agentsBefore) - sum(agentsAfter)).toBe(amount);
    for (const [i, a] of agents.entries()) {
      expect(agentsAfter[i]).toBe(a.agentId === winner.agentId ? agentsBefore[i]! - amount : agentsBefore[i]);
    }

    const row = await chargeRow(charge.chargeId);
    expect(row).toMatchObject({ status: "paid", agentId: winner.agentId, method: "ledger" });
    expect(row!.reference).toMatch(/^PAY_/);
    expect(row!.reference).toBe(won.body.charge.reference);

    const entries = await db()
      .prepare(
        "SELECT account, amount_minor AS amountMinor FROM ledger_entries WHERE transfer_id = ? ORDER BY amount_minor",
      )
      .bind(row!.reference!)
      .all<{ account: string; amountMinor: number }>();
    expect(entries.results).toEqual([
      { account: `agent:${winner.agentId}`, amountMinor: -amount },
      { account: `merchant:${merchant.merchantId}`, amountMinor: amount },
    ]);
    expect(
      await scalar("SELECT COUNT(*) AS v FROM ledger_entries WHERE account = ?", `merchant:${merchant.merchantId}`),
    ).toBe(1);
    expect(await chargePaidAuditRows(charge.chargeId)).toBe(1);
    expect(await scalar("SELECT COUNT(*) AS v FROM audit_events WHERE reference = ?", row!.reference!)).toBe(1);

    await expectGlobalInvariants();
  });

  it("30 parallel pays of 30 charges by one agent funded for exactly 10: 10 land, balance ends at 0", async () => {
    const amount = 300;
    const merchant = await createMerchant({ name: "race-balance" });
    const agent = await createAgent({ name: "ten-shot", credit: amount * 10 });
    const charges = await Promise.all(
      Array.from({ length: 30 }, (_, i) => createCharge(merchant.apiKey, amount, { externalId: `b-${i}` })),
    );

    const responses = await Promise.all(charges.map((c) => payCharge(agent.apiKey, c.chargeId)));

    expect(responses.filter((r) => r.status >= 500)).toEqual([]);
    expect(countBy(responses)).toEqual({ "200:ok": 10, "402:saldo_insuficiente": 20 });

    expect(await agentBalanceRow(agent.agentId)).toBe(0);
    expect(await balanceOf(agent.apiKey)).toBe(0);
    expect(await ledgerSumOf(`agent:${agent.agentId}`)).toBe(0);

    // The running balance of the agent's ledger account, in commit order, never dips below zero.
    const entries = await db()
      .prepare("SELECT amount_minor AS amountMinor FROM ledger_entries WHERE account = ? ORDER BY id")
      .bind(`agent:${agent.agentId}`)
      .all<{ amountMinor: number }>();
    expect(entries.results).toHaveLength(11); // one credit, ten debits
    let running = 0;
    let lowest = 0;
    for (const e of entries.results) {
      running += e.amountMinor;
      lowest = Math.min(lowest, running);
    }
    expect(lowest).toBe(0);
    expect(running).toBe(0);

    expect(await merchantBalance(merchant.apiKey)).toBe(amount * 10);
    expect(
      await scalar(
        "SELECT COUNT(*) AS v FROM ledger_entries WHERE account = ? AND amount_minor = ?",
        `merchant:${merchant.merchantId}`,
        amount,
      ),
    ).toBe(10);

    // Exactly the charges answered 200 are paid, each once; the rest stay pending.
    for (const [i, c] of charges.entries()) {
      const row = await chargeRow(c.chargeId);
      const paid = responses[i]!.status === 200;
      expect(row!.status).toBe(paid ? "paid" : "pending");
      expect(await chargePaidAuditRows(c.chargeId)).toBe(paid ? 1 : 0);
    }

    await expectGlobalInvariants();
  });

  it("the daily limit holds under a race: 20 parallel pays, the limit covers exactly 7", async () => {
    const amount = 150;
    const merchant = await createMerchant({ name: "race-daily" });
    const agent = await createAgent({
      name: "daily-capped",
      credit: 100_000,
      policy: { dailyLimitUsdCents: amount * 7 },
    });
    const charges = await Promise.all(Array.from({ length: 20 }, () => createCharge(merchant.apiKey, amount)));

    const responses = await Promise.all(charges.map((c) => payCharge(agent.apiKey, c.chargeId)));

    expect(responses.filter((r) => r.status >= 500)).toEqual([]);
    expect(countBy(responses)).toEqual({ "200:ok": 7, "402:excede_limite_diario": 13 });
    expect(await balanceOf(agent.apiKey)).toBe(100_000 - amount * 7);
    expect(await merchantBalance(merchant.apiKey)).toBe(amount * 7);
    expect(
      await scalar("SELECT COUNT(*) AS v FROM charges WHERE merchant_id = ? AND status = 'paid'", merchant.merchantId),
    ).toBe(7);
    expect(
      await scalar(
        "SELECT COALESCE(SUM(amount_minor), 0) AS v FROM charges WHERE agent_id = ? AND status = 'paid'",
        agent.agentId,
      ),
    ).toBe(amount * 7);

    await expectGlobalInvariants();
  });

  it("a parallel grant and reject of one approval: exactly one wins, the charge is paid iff the grant won", async () => {
    const amount = 900;
    const merchant = await createMerchant({ name: "race-grant-reject" });
    // Filler agents whose credits queue up in the ledger sequencer: a grant then
    // reads the approval as pending but waits for the ledger, which lets a reject
    // land between the grant's check and its commit (the batch guard must hold).
    const fillers: { agentId: string; apiKey: string }[] = [];
    for (let i = 0; i < 8; i++) fillers.push(await createAgent({ name: `filler-${i}` }));
    const token = await consoleToken();
    const congest = () =>
      Promise.all(
        fillers.map((f) => api("POST", `/console/agents/${f.agentId}/credits`, { token, body: { amountUsdCents: 1 } })),
      );

    // Which request goes first, the reject's delay in ms, and whether the ledger is busy:
    // the assertions hold whoever wins; the variety makes both winners and the
    // check-then-commit window occur.
    const rounds = [
      { rejectFirst: true, stagger: 0, congested: false },
      ...[0, 2, 5, 10, 25].map((stagger) => ({ rejectFirst: false, stagger, congested: false })),
      ...[0, 3, 6, 10].map((stagger) => ({ rejectFirst: false, stagger, congested: true })),
    ];
    const agent = await createAgent({
      name: "held",
      credit: amount * rounds.length,
      policy: { approvalThresholdUsdCents: 500 },
    });
    for (const round of rounds) {
      const charge = await createCharge(merchant.apiKey, amount);
      const approvalId = await payToApproval(agent.apiKey, charge.chargeId);
      const merchantBefore = await merchantBalance(merchant.apiKey);
      const agentBefore = await balanceOf(agent.apiKey);

      const congestion = round.congested ? congest() : Promise.resolve([]);
      const [g, r] = round.rejectFirst
        ? await Promise.all([reject(approvalId), grant(approvalId)]).then(([r2, g2]) => [g2, r2] as const)
        : await Promise.all([grant(approvalId), sleep(round.stagger).then(() => reject(approvalId))]);
      expect((await congestion).every((c) => c.status === 200)).toBe(true);

      const label = `round ${JSON.stringify(round)}: grant ${g.status} ${g.text} / reject ${r.status} ${r.text}`;
      expect([g.status, r.status].sort(), label).toEqual([200, 409]);
      const grantWon = g.status === 200;

      const row = await chargeRow(charge.chargeId);
      const approval = await db()
        .prepare("SELECT status FROM approvals WHERE id = ?")
        .bind(approvalId)
        .first<{ status: string }>();
      if (grantWon) {
        expect(r.body.error, label).toBe("approval_not_pending");
        expect(g.body.approval).toEqual({ approvalId, status: "granted" });
        expect(g.body.charge.status).toBe("paid");
        expect(approval!.status).toBe("granted");
        expect(row!.status).toBe("paid");
        expect(row!.agentId).toBe(agent.agentId);
        expect(await balanceOf(agent.apiKey)).toBe(agentBefore - amount);
        expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + amount);
        expect(await chargePaidAuditRows(charge.chargeId)).toBe(1);
      } else {
        expect(g.body.error, label).toBe("approval_not_pending");
        expect(r.body.approval).toEqual({ approvalId, status: "rejected" });
        expect(approval!.status, label).toBe("rejected");
        expect(row!.status, label).toBe("pending");
        expect(row!.reference).toBeNull();
        expect(await balanceOf(agent.apiKey)).toBe(agentBefore);
        expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore);
        expect(await chargePaidAuditRows(charge.chargeId)).toBe(0);
      }
    }
    // The agent's wallet and its ledger account agree; the fillers were credited once per congested round.
    expect(await ledgerSumOf(`agent:${agent.agentId}`)).toBe(await agentBalanceRow(agent.agentId));
    const congestedRounds = rounds.filter((r) => r.congested).length;
    for (const f of fillers) expect(await agentBalanceRow(f.agentId)).toBe(congestedRounds);

    await expectGlobalInvariants();
  });

  it("10 parallel grants of one approval: exactly one 200, the charge is paid once", async () => {
    const amount = 700;
    const merchant = await createMerchant({ name: "race-grants" });
    const agent = await createAgent({ name: "held-many", credit: 10_000, policy: { approvalThresholdUsdCents: 100 } });
    const charge = await createCharge(merchant.apiKey, amount);
    const approvalId = await payToApproval(agent.apiKey, charge.chargeId);

    const token = await consoleToken();
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => api("POST", `/approvals/${approvalId}/grant`, { token })),
    );

    expect(responses.filter((r) => r.status >= 500)).toEqual([]);
    expect(responses.filter((r) => r.status === 200)).toHaveLength(1);
    expect(responses.filter((r) => r.status === 409)).toHaveLength(9);

    expect(await balanceOf(agent.apiKey)).toBe(10_000 - amount);
    expect(await merchantBalance(merchant.apiKey)).toBe(amount);
    expect((await chargeRow(charge.chargeId))!.status).toBe("paid");
    expect(await chargePaidAuditRows(charge.chargeId)).toBe(1);
    expect(
      await scalar("SELECT COUNT(*) AS v FROM ledger_entries WHERE account = ?", `merchant:${merchant.merchantId}`),
    ).toBe(1);
    expect(await scalar("SELECT status AS v FROM approvals WHERE id = ?", approvalId)).toBe("granted");

    await expectGlobalInvariants();
  });

  it("10 parallel agent registrations all succeed, each with its own identity and deposit address", async () => {
    const token = await consoleToken();
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => api("POST", "/console/agents", { token, body: { name: `burst-${i}` } })),
    );

    expect(responses.map((r) => `${r.status} ${r.status === 201 ? "" : r.text}`.trim())).toEqual(Array(10).fill("201"));
    const ids = responses.map((r) => r.body.agentId as string);
    expect(new Set(ids).size).toBe(10);
    expect(new Set(responses.map((r) => r.body.apiKey)).size).toBe(10);
    // Where deposits are configured, no two agents may share a deposit address.
    const addresses = responses.map((r) => r.body.depositAddress).filter((a): a is string => typeof a === "string");
    expect(new Set(addresses).size).toBe(addresses.length);
    const stored = await db()
      .prepare(`SELECT COUNT(*) AS v FROM agents WHERE id IN (${ids.map(() => "?").join(", ")})`)
      .bind(...ids)
      .first<{ v: number }>();
    expect(stored!.v).toBe(10);

    await expectGlobalInvariants();
  });

  it("10 parallel pays of one over-threshold charge by one agent share one approval", async () => {
    const amount = 2_000;
    const merchant = await createMerchant({ name: "race-approval-hold" });
    const agent = await createAgent({
      name: "needs-human",
      credit: 10_000,
      policy: { approvalThresholdUsdCents: 1_000 },
    });
    const charge = await createCharge(merchant.apiKey, amount);

    const responses = await Promise.all(Array.from({ length: 10 }, () => payCharge(agent.apiKey, charge.chargeId)));

    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(402));
    for (const r of responses) {
      expect(r.body.pendingApproval).toBe(true);
      expect(r.body.charge.status).toBe("pending");
    }
    const ids = new Set(responses.map((r) => r.body.approvalId));
    expect(ids.size).toBe(1);
    const [approvalId] = [...ids];
    expect(approvalId).toMatch(/^apr_/);

    const approvals = await db()
      .prepare("SELECT id, status, agent_id AS agentId FROM approvals WHERE charge_id = ?")
      .bind(charge.chargeId)
      .all<{ id: string; status: string; agentId: string }>();
    expect(approvals.results).toEqual([{ id: approvalId, status: "pending", agentId: agent.agentId }]);

    // Nothing was charged while held.
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await chargeRow(charge.chargeId))!.status).toBe("pending");
    expect(await chargePaidAuditRows(charge.chargeId)).toBe(0);

    await expectGlobalInvariants();
  });
});
