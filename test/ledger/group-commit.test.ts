import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type LedgerDurableObject, ledgerName } from "../../src/ledger/ledger.do";
import { agentCreditPlan } from "../../src/ledger/movements";
import { balanceAfter } from "../../src/ledger/postings";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";

/*
 * Group commit in the ledger sequencer (issue 8): plans that arrive while a
 * batch is in flight go together in the next D1 batch; a plan refused by its
 * guard refuses nothing else; the audit chain stays gap-free and verifies.
 */
const credit = (agentId: string, amountMinor: number, i: number) =>
  agentCreditPlan({
    agentId,
    amountMinor,
    transferId: `grp_${crypto.randomUUID()}`,
    reference: `group-${i}`,
    by: "test",
    createdAt: new Date().toISOString(),
  });

async function expectChainVerifies() {
  const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(verify.body.ok).toBe(true);
}

describe("group commit", () => {
  it("commits plans sent together in fewer batches than plans, each with its own results", async () => {
    const agents = await Promise.all(Array.from({ length: 12 }, () => createAgent()));
    const ledger = env.LEDGER.getByName(ledgerName(0));
    const before = await ledger.stats();
    const results = await Promise.all(agents.map((agent, i) => ledger.commit(credit(agent.agentId, 100 + i, i))));
    const after = await ledger.stats();
    expect(after.plans - before.plans).toBe(12);
    expect(after.batches - before.batches).toBeLessThan(12);
    // Each plan got its own results: its balance update answers with that agent's balance after it.
    results.forEach((result, i) => {
      expect(result.kind).toBe("committed");
      if (result.kind === "committed")
        expect(balanceAfter(result.results, `agent:${agents[i]!.agentId}`)).toBe(100 + i);
    });
    const seqs = results.flatMap((r) => (r.kind === "committed" ? r.auditSeqs : []));
    expect(new Set(seqs).size).toBe(12);
    expect(Math.max(...seqs) - Math.min(...seqs)).toBe(11);
    await expectChainVerifies();
  });

  it("writes a large group's audit rows several to an insert, and the chain still verifies row by row", async () => {
    const agents = await Promise.all(Array.from({ length: 33 }, () => createAgent()));
    const ledger = env.LEDGER.getByName(ledgerName(0));
    const before = await ledger.stats();
    // Called inside the object, all 33 are queued before the first batch returns: it goes alone, then two groups of 16.
    const results = await runInDurableObject(ledger, (instance) => {
      const sequencer = instance as unknown as LedgerDurableObject;
      return Promise.all(agents.map((agent, i) => sequencer.commit(credit(agent.agentId, 7, i))));
    });
    const after = await ledger.stats();
    expect(after.plans - before.plans).toBe(33);
    expect(after.batches - before.batches).toBe(3);
    // A credit plan's own statements are a guard and the balance update (which answers with the balance);
    // its ledger entries (two rows) and audit row are appended. Alone: 2 + 1 + 1. A group of 16: 32, then
    // 32 entry rows five values wide in two inserts (20 rows at most each) and 16 audit rows thirteen
    // wide in three (7 at most each).
    expect(after.statements - before.statements).toBe(4 + 2 * (32 + 2 + 3));
    const seqs = results.flatMap((r) => (r.kind === "committed" ? r.auditSeqs : [])).sort((a, b) => a - b);
    expect(seqs).toHaveLength(33);
    expect(seqs.at(-1)! - seqs[0]!).toBe(32);
    const rows = await env.DB.prepare(
      "SELECT seq, agent_id AS agentId, amount_minor AS amountMinor FROM audit_events WHERE seq BETWEEN ? AND ? ORDER BY seq",
    )
      .bind(seqs[0], seqs.at(-1))
      .all<{ seq: number; agentId: string; amountMinor: number }>();
    expect(rows.results.map((r) => r.seq)).toEqual(seqs);
    results.forEach((r, i) => {
      if (r.kind !== "committed") throw new Error(`plan ${i} was ${r.kind}`);
      expect(rows.results.find((row) => row.seq === r.auditSeqs[0])).toEqual({
        seq: r.auditSeqs[0],
        agentId: agents[i]!.agentId,
        amountMinor: 7,
      });
    });
    await expectChainVerifies();
  });

  it("a plan refused by its guard inside a group refuses only itself", async () => {
    const agents = await Promise.all(Array.from({ length: 8 }, () => createAgent()));
    const ledger = env.LEDGER.getByName(ledgerName(0));
    const plans = agents.map((agent, i) => credit(agent.agentId, 50, i));
    plans.splice(3, 0, credit("agent_does_not_exist", 50, 99));
    const results = await Promise.all(plans.map((plan) => ledger.commit(plan)));
    expect(results.map((r) => r.kind)).toEqual([
      "committed",
      "committed",
      "committed",
      "refused",
      "committed",
      "committed",
      "committed",
      "committed",
      "committed",
    ]);
    expect(results[3]).toEqual({ kind: "refused", reason: "agent_not_found" });
    for (const agent of agents) expect(await balanceOf(agent.apiKey)).toBe(50);
    const sum = await env.DB.prepare("SELECT COALESCE(SUM(amount_minor), 0) AS total FROM ledger_entries").first<{
      total: number;
    }>();
    expect(sum?.total).toBe(0);
    await expectChainVerifies();
  });

  it("parallel payments through the API: every payment lands once, the losers of a race on one charge are refused", async () => {
    const merchant = await createMerchant();
    const agents = await Promise.all(Array.from({ length: 10 }, () => createAgent({ credit: 1000 })));
    const charges = await Promise.all(agents.map(() => createCharge(merchant.apiKey, 100)));
    const contested = await createCharge(merchant.apiKey, 70);
    const responses = await Promise.all([
      ...agents.map((agent, i) => payCharge(agent.apiKey, charges[i]!.chargeId)),
      ...agents.slice(0, 5).map((agent) => payCharge(agent.apiKey, contested.chargeId)),
    ]);
    expect(responses.slice(0, 10).every((r) => r.status === 200)).toBe(true);
    const race = responses.slice(10);
    expect(race.filter((r) => r.status === 200)).toHaveLength(1);
    expect(race.filter((r) => r.status === 409 && r.body.error === "charge_not_pending")).toHaveLength(4);
    const paid = await env.DB.prepare("SELECT COUNT(*) AS n FROM charges WHERE merchant_id = ? AND status = 'paid'")
      .bind(merchant.merchantId)
      .first<{ n: number }>();
    expect(paid?.n).toBe(11);
    const total = (await Promise.all(agents.map((a) => balanceOf(a.apiKey)))).reduce((a, b) => a + b, 0);
    expect(total).toBe(10 * 1000 - 10 * 100 - 70);
    // Each payment's entries and events (merged into its group's inserts) landed once: two entries that
    // sum to zero, and payment.succeeded and charge.succeeded naming its charge.
    const entries = await env.DB.prepare(
      "SELECT c.id AS chargeId, COUNT(*) AS n, SUM(e.amount_minor) AS total FROM charges c JOIN ledger_entries e ON e.transfer_id = c.reference WHERE c.merchant_id = ? GROUP BY c.id",
    )
      .bind(merchant.merchantId)
      .all<{ chargeId: string; n: number; total: number }>();
    expect(entries.results).toHaveLength(11);
    expect(entries.results.every((e) => e.n === 2 && e.total === 0)).toBe(true);
    const events = await env.DB.prepare(
      "SELECT json_extract(data, '$.chargeId') AS chargeId, type FROM outbox_events WHERE merchant_id = ? AND type IN ('payment.succeeded', 'charge.succeeded')",
    )
      .bind(merchant.merchantId)
      .all<{ chargeId: string; type: string }>();
    const paidIds = entries.results.map((e) => e.chargeId).sort();
    for (const type of ["payment.succeeded", "charge.succeeded"])
      expect(
        events.results
          .filter((e) => e.type === type)
          .map((e) => e.chargeId)
          .sort(),
      ).toEqual(paidIds);
    await expectChainVerifies();
  });
});
