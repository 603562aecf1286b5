import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import {
  balanceOf,
  createAgent,
  createCharge,
  createMerchant,
  creditAgent,
  merchantBalance,
  payCharge,
} from "../helpers/factories";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

const grant = async (id: string) => api("POST", `/approvals/${id}/grant`, { token: await consoleToken() });
const reject = async (id: string) => api("POST", `/approvals/${id}/reject`, { token: await consoleToken() });

async function listApprovals(status?: string) {
  const res = await api("GET", `/console/approvals${status ? `?status=${status}` : ""}`, {
    token: await consoleToken(),
  });
  expect(res.status).toBe(200);
  return res.body.approvals as Array<Record<string, unknown> & { approvalId: string }>;
}

async function approvalRows(chargeId: string) {
  const { results } = await env.DB.prepare(
    "SELECT id, status, decided_by AS decidedBy FROM approvals WHERE charge_id = ? ORDER BY created_at, rowid",
  )
    .bind(chargeId)
    .all<{ id: string; status: string; decidedBy: string | null }>();
  return results;
}

async function outboxFor(type: string, key: "chargeId" | "approvalId", value: string) {
  const { results } = await env.DB.prepare(
    `SELECT merchant_id AS merchantId, data FROM outbox_events WHERE type = ? AND json_extract(data, '$.${key}') = ?`,
  )
    .bind(type, value)
    .all<{ merchantId: string | null; data: string }>();
  return results.map((r) => ({ merchantId: r.merchantId, data: JSON.parse(r.data) as Record<string, unknown> }));
}

/** A merchant, an agent with a threshold, and one held charge. */
async function held(
  options: { credit?: number; threshold?: number; amount?: number; policy?: Record<string, unknown> } = {},
) {
  const merchant = await createMerchant();
  const agent = await createAgent({
    credit: options.credit ?? 10_000,
    policy: { approvalThresholdUsdCents: options.threshold ?? 1000, ...options.policy },
  });
  const charge = await createCharge(merchant.apiKey, options.amount ?? 2500);
  const res = await payCharge(agent.apiKey, charge.chargeId);
  expect(res.status).toBe(402);
  expect(res.body.pendingApproval).toBe(true);
  return { merchant, agent, charge, approvalId: res.body.approvalId as string, hold: res.body };
}

describe("approval flow: hold, list, grant", () => {
  it("a held payment is listed as pending, granting it pays the charge and moves the money", async () => {
    const { merchant, agent, charge, approvalId, hold } = await held({ credit: 10_000, threshold: 1000, amount: 2500 });
    expect(approvalId).toMatch(/^apr_/);

    const pending = await listApprovals("pending");
    const listed = pending.find((a) => a.approvalId === approvalId);
    expect(listed).toBeDefined();
    expect(Object.keys(listed!).sort()).toEqual([
      "agentId",
      "amountMinor",
      "approvalId",
      "chargeId",
      "createdAt",
      "expiresAt",
      "merchantId",
      "reason",
      "status",
    ]);
    expect(listed).toMatchObject({
      approvalId,
      chargeId: charge.chargeId,
      agentId: agent.agentId,
      merchantId: merchant.merchantId,
      amountMinor: 2500,
      reason: "requiere_aprobacion_humana",
      status: "pending",
      expiresAt: hold.expiresAt,
    });
    expect(listed!.createdAt).toMatch(ISO);
    expect(Date.parse(listed!.expiresAt as string) - Date.parse(listed!.createdAt as string)).toBe(24 * 3600_000);
    for (const a of pending) expect(a.status).toBe("pending");

    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    const res = await grant(approvalId);
    expect(res.status).toBe(200);
    expect(res.body.approval).toEqual({ approvalId, status: "granted" });
    expect(res.body.charge).toMatchObject({
      chargeId: charge.chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 2500,
      currency: "USD",
      status: "paid",
      method: "ledger",
    });
    expect(res.body.charge.reference).toMatch(/^PAY_/);
    expect(res.body.charge.paidAt).toMatch(ISO);

    expect(await balanceOf(agent.apiKey)).toBe(7500);
    expect(await merchantBalance(merchant.apiKey)).toBe(2500);
    const pub = await api("GET", `/charges/${charge.chargeId}`);
    expect(pub.body).toEqual(res.body.charge);

    const expectedData = {
      chargeId: charge.chargeId,
      merchantId: merchant.merchantId,
      agentId: agent.agentId,
      amountMinor: 2500,
      currency: "USD",
      method: "ledger",
      reference: res.body.charge.reference,
    };
    for (const type of ["payment.succeeded", "charge.succeeded"]) {
      const rows = await outboxFor(type, "chargeId", charge.chargeId);
      expect(rows, type).toHaveLength(1);
      expect(rows[0]!.merchantId).toBe(merchant.merchantId);
      expect(rows[0]!.data).toMatchObject(expectedData);
    }

    expect((await approvalRows(charge.chargeId)).map((r) => r.status)).toEqual(["granted"]);
    expect((await approvalRows(charge.chargeId))[0]!.decidedBy).toBe("ops@example.com");
    expect((await listApprovals("pending")).some((a) => a.approvalId === approvalId)).toBe(false);
    const granted = (await listApprovals("granted")).find((a) => a.approvalId === approvalId);
    expect(granted?.status).toBe("granted");

    // The audit chain records the payment with the approval.
    const audit = await env.DB.prepare("SELECT type, data FROM audit_events WHERE charge_id = ?")
      .bind(charge.chargeId)
      .all<{ type: string; data: string }>();
    expect(audit.results).toHaveLength(1);
    expect(audit.results[0]!.type).toBe("charge.paid");
    expect(JSON.parse(audit.results[0]!.data)).toMatchObject({
      approvalId,
      approvedBy: "ops@example.com",
      method: "ledger",
    });

    // Granting again conflicts and moves nothing.
    const again = await grant(approvalId);
    expect(again.status).toBe(409);
    expect(again.body.error).toBe("approval_not_pending");
    expect(await balanceOf(agent.apiKey)).toBe(7500);
    expect(await merchantBalance(merchant.apiKey)).toBe(2500);

    // Rejecting a granted approval conflicts too.
    const late = await reject(approvalId);
    expect(late.status).toBe(409);
    expect(late.body.error).toBe("approval_not_pending");
  });

  it("writes an approval.required outbox event with approvalId, reason and expiresAt", async () => {
    const { merchant, charge, approvalId, hold } = await held();
    const rows = await outboxFor("approval.required", "approvalId", approvalId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.merchantId).toBe(merchant.merchantId);
    expect(rows[0]!.data).toMatchObject({
      approvalId,
      reason: "requiere_aprobacion_humana",
      expiresAt: hold.expiresAt,
    });
    expect(rows[0]!.data.expiresAt).toMatch(ISO);
    expect((await outboxFor("approval.required", "chargeId", charge.chargeId)).length).toBe(1);
  });

  it("paying again while pending returns the same approval and creates no second row or event", async () => {
    const { agent, charge, approvalId, hold } = await held();
    for (let i = 0; i < 2; i++) {
      const again = await payCharge(agent.apiKey, charge.chargeId);
      expect(again.status).toBe(402);
      expect(again.body.pendingApproval).toBe(true);
      expect(again.body.approvalId).toBe(approvalId);
      expect(again.body.expiresAt).toBe(hold.expiresAt);
      expect(again.body.charge.status).toBe("pending");
    }
    expect(await approvalRows(charge.chargeId)).toHaveLength(1);
    expect(await outboxFor("approval.required", "chargeId", charge.chargeId)).toHaveLength(1);
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
  });
});

describe("approval flow: two agents held on one charge", () => {
  it("each agent gets an approval of its own (402, not 409); granting one pays the charge once and ends the other", async () => {
    const merchant = await createMerchant();
    const [alice, bob] = await Promise.all(
      [1, 2].map(() => createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1_000 } })),
    );
    const charge = await createCharge(merchant.apiKey, 2_500);
    const aliceHold = await payCharge(alice!.apiKey, charge.chargeId);
    const bobHold = await payCharge(bob!.apiKey, charge.chargeId);
    for (const hold of [aliceHold, bobHold]) {
      expect(hold.status).toBe(402);
      expect(hold.body).toMatchObject({
        pendingApproval: true,
        reason: "requiere_aprobacion_humana",
        charge: { chargeId: charge.chargeId, status: "pending" },
      });
    }
    expect(bobHold.body.approvalId).not.toBe(aliceHold.body.approvalId);
    // Each paying again gets its own approval back.
    expect((await payCharge(bob!.apiKey, charge.chargeId)).body.approvalId).toBe(bobHold.body.approvalId);

    const granted = await grant(bobHold.body.approvalId);
    expect(granted.status).toBe(200);
    expect(granted.body.charge).toMatchObject({ status: "paid", agentId: bob!.agentId });
    const late = await grant(aliceHold.body.approvalId);
    expect(late.status).toBe(409);
    expect(await balanceOf(alice!.apiKey)).toBe(10_000);
    expect(await balanceOf(bob!.apiKey)).toBe(7_500);
    expect(await merchantBalance(merchant.apiKey)).toBe(2_500);
    expect((await approvalRows(charge.chargeId)).map((a) => a.status).sort()).toEqual(["expired", "granted"]);
  });
});

describe("approval flow: reject", () => {
  it("rejecting leaves the charge pending; a second reject and a grant afterwards are 409", async () => {
    const { merchant, agent, charge, approvalId } = await held();
    const res = await reject(approvalId);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ approval: { approvalId, status: "rejected" } });

    const pub = await api("GET", `/charges/${charge.chargeId}`);
    expect(pub.body).toMatchObject({ status: "pending", agentId: null, method: null, reference: null, paidAt: null });
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await approvalRows(charge.chargeId)).map((r) => r.status)).toEqual(["rejected"]);
    expect((await listApprovals("rejected")).some((a) => a.approvalId === approvalId)).toBe(true);
    expect((await listApprovals("pending")).some((a) => a.approvalId === approvalId)).toBe(false);

    const second = await reject(approvalId);
    expect(second.status).toBe(409);
    expect(second.body.error).toBe("approval_not_pending");

    const granted = await grant(approvalId);
    expect(granted.status).toBe(409);
    expect(granted.body.error).toBe("approval_not_pending");
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
    expect(await outboxFor("payment.succeeded", "chargeId", charge.chargeId)).toHaveLength(0);
  });
});

describe("approval flow: expiry", () => {
  const expire = (approvalId: string) =>
    env.DB.prepare("UPDATE approvals SET expires_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 60_000).toISOString(), approvalId)
      .run();

  it("granting an expired approval is 409 approval_expired, it becomes expired, and paying again creates a new one", async () => {
    const { merchant, agent, charge, approvalId } = await held();
    await expire(approvalId);
    const res = await grant(approvalId);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("approval_expired");
    expect((await approvalRows(charge.chargeId)).map((r) => r.status)).toEqual(["expired"]);
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");

    // A second grant now finds it not pending.
    const again = await grant(approvalId);
    expect(again.status).toBe(409);

    const repay = await payCharge(agent.apiKey, charge.chargeId);
    expect(repay.status).toBe(402);
    expect(repay.body.pendingApproval).toBe(true);
    expect(repay.body.approvalId).toMatch(/^apr_/);
    expect(repay.body.approvalId).not.toBe(approvalId);
    const rows = await approvalRows(charge.chargeId);
    expect(rows.map((r) => [r.id, r.status])).toEqual([
      [approvalId, "expired"],
      [repay.body.approvalId, "pending"],
    ]);

    // The new approval can be granted.
    const ok = await grant(repay.body.approvalId);
    expect(ok.status).toBe(200);
    expect(ok.body.charge.status).toBe("paid");
    expect(await balanceOf(agent.apiKey)).toBe(7500);
  });

  it("paying again after expiry (without a grant attempt) replaces the stale approval", async () => {
    const { agent, charge, approvalId } = await held();
    await expire(approvalId);
    const repay = await payCharge(agent.apiKey, charge.chargeId);
    expect(repay.status).toBe(402);
    expect(repay.body.approvalId).not.toBe(approvalId);
    const rows = await approvalRows(charge.chargeId);
    expect(rows.find((r) => r.id === approvalId)!.status).toBe("expired");
    expect(rows.filter((r) => r.status === "pending").map((r) => r.id)).toEqual([repay.body.approvalId]);
  });

  it("rejecting an expired approval is 409, and listing shows it expired, not pending", async () => {
    const { approvalId } = await held();
    await expire(approvalId);
    const res = await reject(approvalId);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("approval_expired");
    expect((await listApprovals("pending")).some((a) => a.approvalId === approvalId)).toBe(false);
    expect((await listApprovals("expired")).find((a) => a.approvalId === approvalId)?.status).toBe("expired");
  });

  it("an overdue approval is reported expired by the list even before anyone touches it", async () => {
    const { approvalId } = await held();
    await expire(approvalId);
    expect((await listApprovals("pending")).some((a) => a.approvalId === approvalId)).toBe(false);
    expect((await listApprovals()).find((a) => a.approvalId === approvalId)?.status).toBe("expired");
  });
});

describe("approval flow: grant re-checks balance and hard limits", () => {
  it("402 saldo_insuficiente when the balance became insufficient; the approval stays pending; a credit lets it through", async () => {
    const { merchant, agent, charge, approvalId } = await held({ credit: 1000, threshold: 300, amount: 800 });
    // Spend down below the held amount with a payment at the threshold (no approval needed).
    const small = await createCharge(merchant.apiKey, 300);
    expect((await payCharge(agent.apiKey, small.chargeId)).status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(700);

    const res = await grant(approvalId);
    expect(res.status).toBe(402);
    expect(res.body.error).toBe("saldo_insuficiente");
    expect((await approvalRows(charge.chargeId)).map((r) => r.status)).toEqual(["pending"]);
    expect((await listApprovals("pending")).some((a) => a.approvalId === approvalId)).toBe(true);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
    expect(await balanceOf(agent.apiKey)).toBe(700);
    expect(await merchantBalance(merchant.apiKey)).toBe(300);

    await creditAgent(agent.agentId, 100);
    const ok = await grant(approvalId);
    expect(ok.status).toBe(200);
    expect(ok.body.approval).toEqual({ approvalId, status: "granted" });
    expect(ok.body.charge.status).toBe("paid");
    expect(await balanceOf(agent.apiKey)).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(1100);
  });

  it("a hold created while the balance was short can be granted after a credit", async () => {
    const { agent, approvalId } = await held({ credit: 100, threshold: 300, amount: 800 });
    const short = await grant(approvalId);
    expect(short.status).toBe(402);
    expect(short.body.error).toBe("saldo_insuficiente");
    await creditAgent(agent.agentId, 700);
    const ok = await grant(approvalId);
    expect(ok.status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(0);
  });

  it("402 when a hard limit was tightened after the hold; the approval stays pending", async () => {
    const { agent, charge, approvalId } = await held({ credit: 10_000, threshold: 1000, amount: 2500 });
    const put = await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token: await consoleToken(),
      body: { approvalThresholdUsdCents: 1000, maxPerTransactionUsdCents: 2000 },
    });
    expect(put.status).toBe(200);
    const res = await grant(approvalId);
    expect(res.status).toBe(402);
    expect(res.body.error).toBe("excede_tope_por_transaccion");
    expect((await approvalRows(charge.chargeId)).map((r) => r.status)).toEqual(["pending"]);
    expect(await balanceOf(agent.apiKey)).toBe(10_000);

    // Loosen it again and the same approval goes through.
    await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token: await consoleToken(),
      body: { approvalThresholdUsdCents: 1000 },
    });
    const ok = await grant(approvalId);
    expect(ok.status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(7500);
  });

  it("402 when a daily limit tightened after the hold would be exceeded", async () => {
    const { agent, approvalId } = await held({ credit: 10_000, threshold: 1000, amount: 2500 });
    await api("PUT", `/console/agents/${agent.agentId}/policy`, {
      token: await consoleToken(),
      body: { approvalThresholdUsdCents: 1000, dailyLimitUsdCents: 2000 },
    });
    const res = await grant(approvalId);
    expect(res.status).toBe(402);
    expect(res.body.error).toBe("excede_limite_diario");
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
  });

  it("granting after another agent paid the charge is 409 and charges nobody twice", async () => {
    const { merchant, agent, charge, approvalId } = await held({ amount: 2500 });
    const other = await createAgent({ credit: 10_000 });
    const paid = await payCharge(other.apiKey, charge.chargeId);
    expect(paid.status).toBe(200);
    expect(paid.body.charge.agentId).toBe(other.agentId);
    // The payment closed the now-moot approval.
    expect((await approvalRows(charge.chargeId)).map((r) => r.status)).toEqual(["expired"]);
    const res = await grant(approvalId);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("approval_not_pending");
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect(await balanceOf(other.apiKey)).toBe(7500);
    expect(await merchantBalance(merchant.apiKey)).toBe(2500);
    expect(await outboxFor("payment.succeeded", "chargeId", charge.chargeId)).toHaveLength(1);
  });
});

describe("approval errors", () => {
  it("404 approval_not_found for an unknown approval id on grant and reject", async () => {
    const g = await grant("apr_doesnotexist0000000000");
    expect(g.status).toBe(404);
    expect(g.body.error).toBe("approval_not_found");
    const r = await reject("apr_doesnotexist0000000000");
    expect(r.status).toBe(404);
    expect(r.body.error).toBe("approval_not_found");
  });

  it("grant, reject and list need a console session", async () => {
    const { agent, approvalId } = await held();
    expect((await api("POST", `/approvals/${approvalId}/grant`)).status).toBe(401);
    expect((await api("POST", `/approvals/${approvalId}/reject`)).status).toBe(401);
    expect((await api("GET", "/console/approvals?status=pending")).status).toBe(401);
    const asAgent = await api("POST", `/approvals/${approvalId}/grant`, { token: agent.apiKey });
    expect(asAgent.status).toBe(403);
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    expect((await listApprovals("pending")).some((a) => a.approvalId === approvalId)).toBe(true);
  });

  it("400 for an unknown status filter", async () => {
    const res = await api("GET", "/console/approvals?status=bogus", { token: await consoleToken() });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });
});
