import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { creditWallet } from "../../src/agents/wallet-credit";
import { type CommitResult, type LedgerDurableObject, ledgerName, ledgerOf } from "../../src/ledger/ledger.do";
import { agentCreditPlan } from "../../src/ledger/movements";
import type { CommitPlan } from "../../src/ledger/plan";
import { setFaultHook } from "../../src/lib/faults";
import { api, consoleToken } from "../helpers/api";
import { archiveAll, checkpointNow } from "../helpers/archive";
import { balanceOf, createAgent } from "../helpers/factories";

/*
 * Regression: a manual top-up could be applied twice. After a group batch
 * fails with anything but a guard, the sequencer commits each plan of the
 * group again on its own; if that batch in fact committed (a lost answer),
 * every plan runs twice, and a credit guarded only by its agent existing
 * landed twice. A credit now refuses a transfer id already recorded.
 */
const credit = (agentId: string, amountMinor: number) =>
  agentCreditPlan({
    agentId,
    amountMinor,
    transferId: `credit_${crypto.randomUUID()}`,
    reference: "credit-once",
    by: "test",
    createdAt: new Date().toISOString(),
  });

afterEach(() => setFaultHook(null));

async function expectChainVerifies() {
  const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(verify.body.ok).toBe(true);
}

async function recorded(transferId: string) {
  const entries = await env.DB.prepare(
    "SELECT COUNT(*) AS n, COALESCE(SUM(amount_minor), 0) AS total FROM ledger_entries WHERE transfer_id = ?",
  )
    .bind(transferId)
    .first<{ n: number; total: number }>();
  const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE reference = ?")
    .bind(transferId)
    .first<{ n: number }>();
  return { entries: entries?.n, sum: entries?.total, auditRows: audit?.n };
}

const transferOf = (plan: CommitPlan) => plan.audit[0]!.reference!;

describe("a manual credit lands once", () => {
  it("the same credit plan committed twice: credited once, the second refused credit_already_recorded", async () => {
    const agent = await createAgent();
    const plan = credit(agent.agentId, 300);
    const ledger = ledgerOf(env, 0);
    const first = await ledger.commit(plan);
    expect(first.kind).toBe("committed");
    const second = await ledger.commit(plan);
    expect(second).toEqual({ kind: "refused", reason: "credit_already_recorded" });
    expect(await balanceOf(agent.apiKey)).toBe(300);
    expect(await recorded(transferOf(plan))).toEqual({ entries: 2, sum: 0, auditRows: 1 });
    await expectChainVerifies();
  });

  it("a group batch that committed but answered an error: its credits, committed again one by one, are refused, not doubled", async () => {
    const [warm, a, b] = await Promise.all([createAgent(), createAgent(), createAgent()]);
    const plans = [credit(warm!.agentId, 10), credit(a!.agentId, 200), credit(b!.agentId, 300)];
    // The first plan goes alone; the two others, queued behind it, go as one group, whose batch
    // commits and then fails (after the batch, as a lost answer would).
    let batches = 0;
    setFaultHook((point) => {
      if (point === "ledger.after_batch" && ++batches === 2) throw new Error("injected: the group's answer is lost");
    });
    const results = await runInDurableObject(env.LEDGER.getByName(ledgerName(0)), (instance) => {
      const sequencer = instance as unknown as LedgerDurableObject;
      return Promise.all(plans.map((plan) => sequencer.commit(plan)));
    });
    expect(batches).toBeGreaterThanOrEqual(2);
    expect(results.map((r: CommitResult) => r.kind)).toEqual(["committed", "refused", "refused"]);
    expect(results[1]).toEqual({ kind: "refused", reason: "credit_already_recorded" });
    expect(await balanceOf(warm!.apiKey)).toBe(10);
    expect(await balanceOf(a!.apiKey)).toBe(200);
    expect(await balanceOf(b!.apiKey)).toBe(300);
    for (const plan of plans.slice(1))
      expect(await recorded(transferOf(plan))).toEqual({ entries: 2, sum: 0, auditRows: 1 });
    await expectChainVerifies();
  });

  it("creditWallet, told by the sequencer that its credit is already recorded, answers it as done", async () => {
    const agent = await createAgent();
    const real = ledgerOf(env, 0);
    // A sequencer that commits the plan, loses the answer and commits it again (what commitGroup does after a lost answer).
    const ledger = {
      commit: async (plan: CommitPlan) => {
        await real.commit(plan);
        return real.commit(plan);
      },
    };
    const lossy = { ...env, LEDGER: { getByName: () => ledger } } as unknown as typeof env;
    const result = await creditWallet(
      { env: lossy, agentId: agent.agentId },
      { amountMinor: 450, reference: "lost-answer", by: "test" },
    );
    expect(result).toEqual({ ok: true, balanceMinor: 450 });
    expect(await balanceOf(agent.apiKey)).toBe(450);
    await expectChainVerifies();
  });
});

describe("a manual credit lands once, after archiving too", () => {
  it("a credit committed again once its entries and audit row were archived is still refused", async () => {
    const agent = await createAgent();
    const plan = credit(agent.agentId, 400);
    const ledger = ledgerOf(env, 0);
    expect((await ledger.commit(plan)).kind).toBe("committed");
    // Another row after it, so the credit is not the chain's head (the head never leaves D1).
    expect((await ledger.commit(credit(agent.agentId, 1))).kind).toBe("committed");
    await checkpointNow();
    await archiveAll();
    expect(await recorded(transferOf(plan))).toEqual({ entries: 0, sum: 0, auditRows: 0 });

    expect(await ledger.commit(plan)).toEqual({ kind: "refused", reason: "credit_already_recorded" });
    expect(await balanceOf(agent.apiKey)).toBe(401);
    await expectChainVerifies();
  });
});
