import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { outcomeReply } from "../../src/agents/outcomes";
import { payCharge as payFromWallet } from "../../src/agents/wallet";
import { AgentStateCache, readCharge } from "../../src/agents/wallet-state";
import { ApiError } from "../../src/lib/errors";
import { api } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";

/*
 * Regression: a hold for approval landed on a charge another agent had paid
 * between the holding agent's read and its hold (two agents, two wallet
 * objects, nothing serializes them). The hold's batch now re-checks the charge,
 * as a payment's does. The interleaving is forced without timing: the wallet's
 * service function runs with a D1 that lets `interfere` act on the charge right
 * after the hold's fresh read returns, before the hold's batch is sent.
 */

/** `env` with a D1 that runs `interfere` once, right after the batch that reads the charge's pending approval. */
function envInterferingAfterRead(interfere: () => Promise<void>) {
  const real = env.DB;
  const sqlOf = new WeakMap<D1PreparedStatement, string>();
  let done = false;
  const db = {
    prepare(sql: string) {
      const statement = real.prepare(sql);
      sqlOf.set(statement, sql);
      // bind returns a new statement: remember its SQL too.
      const bind = statement.bind.bind(statement);
      statement.bind = (...values: unknown[]) => {
        const bound = bind(...values);
        sqlOf.set(bound, sql);
        return bound;
      };
      return statement;
    },
    async batch(statements: D1PreparedStatement[]) {
      const results = await real.batch(statements);
      const isHoldRead = statements.some((s) =>
        /FROM approvals WHERE charge_id = \? AND agent_id = \? AND status = 'pending'/.test(sqlOf.get(s) ?? ""),
      );
      if (isHoldRead && !done) {
        done = true;
        await interfere();
      }
      return results;
    },
  } as unknown as D1Database;
  return { env: { ...env, DB: db }, interfered: () => done };
}

async function holdWithInterference(interfere: (chargeId: string) => Promise<void>) {
  const merchant = await createMerchant();
  const agentA = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1000 } });
  const charge = await createCharge(merchant.apiKey, 2500);
  const wrapped = envInterferingAfterRead(() => interfere(charge.chargeId));
  const turn = { cache: new AgentStateCache(), endTurn: () => {} };
  const outcome = await payFromWallet(
    { env: wrapped.env, agentId: agentA.agentId, turn },
    charge.chargeId,
    readCharge(env, charge.chargeId),
  );
  expect(wrapped.interfered()).toBe(true);
  return { merchant, agentA, charge, outcome };
}

async function approvalTraces(chargeId: string) {
  const rows = await env.DB.prepare("SELECT status FROM approvals WHERE charge_id = ?")
    .bind(chargeId)
    .all<{ status: string }>();
  const events = await env.DB.prepare(
    "SELECT id FROM outbox_events WHERE type = 'approval.required' AND json_extract(data, '$.chargeId') = ?",
  )
    .bind(chargeId)
    .all();
  return { approvals: rows.results, events: events.results };
}

describe("a hold re-checks the charge in its batch", () => {
  it("another agent pays the charge between the read and the hold: 409 charge_not_pending, no approval, no event", async () => {
    let paidByB: number | undefined;
    const { charge, outcome } = await holdWithInterference(async (chargeId) => {
      const agentB = await createAgent({ credit: 10_000 });
      paidByB = (await payCharge(agentB.apiKey, chargeId)).status;
    });
    expect(paidByB).toBe(200);
    expect(outcome).toEqual({ kind: "conflict", reason: "charge_not_pending" });
    // What the route answers, as for any payment of a charge no longer pending.
    let thrown: unknown;
    try {
      outcomeReply(outcome, { kind: "charge" }, "agent");
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ status: 409, error: "charge_not_pending" });
    expect(await approvalTraces(charge.chargeId)).toEqual({ approvals: [], events: [] });
    const row = await env.DB.prepare("SELECT status FROM charges WHERE id = ?")
      .bind(charge.chargeId)
      .first<{ status: string }>();
    expect(row?.status).toBe("paid");
  });

  it("an x402 payment claims the charge between the read and the hold: 409 charge_not_pending, no approval, no event", async () => {
    const { charge, outcome } = await holdWithInterference(async (chargeId) => {
      // What the x402 settle's claim does to a pending charge (src/x402/reserve.ts).
      await env.DB.prepare(
        "UPDATE charges SET x402_claim = ? WHERE id = ? AND status = 'pending' AND x402_claim IS NULL",
      )
        .bind("x402_test_claim", chargeId)
        .run();
    });
    expect(outcome).toEqual({ kind: "conflict", reason: "charge_not_pending" });
    expect(await approvalTraces(charge.chargeId)).toEqual({ approvals: [], events: [] });
  });

  it("nothing in between: the hold lands as before", async () => {
    const { charge, outcome } = await holdWithInterference(async () => {});
    expect(outcome).toMatchObject({ kind: "approval", reason: "requiere_aprobacion_humana" });
    const traces = await approvalTraces(charge.chargeId);
    expect(traces.approvals).toEqual([{ status: "pending" }]);
    expect(traces.events).toHaveLength(1);
  });

  it("a checkout link's hold, whose charge is born in the same batch, still holds", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5000, policy: { approvalThresholdUsdCents: 500 } });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 900, description: "born held" },
    });
    expect(link.status).toBeLessThan(300);
    const held = await api("POST", `/checkout/${link.body.checkoutToken}/pay`, { token: agent.apiKey });
    expect(held.status).toBe(402);
    expect(held.body).toMatchObject({ pendingApproval: true, charge: { status: "pending" } });
    const traces = await approvalTraces(held.body.charge.chargeId);
    expect(traces.approvals).toEqual([{ status: "pending" }]);
    expect(traces.events).toHaveLength(1);
  });
});
