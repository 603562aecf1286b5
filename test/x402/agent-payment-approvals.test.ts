import { env } from "cloudflare:workers";
import { getAddress } from "viem";
import { describe, expect, it } from "vitest";
import { usingApproval, X402_APPROVAL_USED } from "../../src/agents/x402-approvals";
import { settingsOf } from "../../src/config/env";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { agentX402PaymentPlan, X402_OUT_RECORDED } from "../../src/ledger/x402-out";
import { caip2 } from "../../src/x402/terms";
import { api, consoleToken } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { PAY_TO, REPORT_URL, v2Entry, v2Request } from "../helpers/paywall-terms";

/*
 * The approval threshold on an agent's outbound x402 payments (POST /agent/x402/payments): above it
 * the payment is held for a human (402 pendingApproval, nothing signed or debited); a console user's
 * grant pays nothing; the agent's same request (resource, payTo, network, asset, exact amount) made
 * again before the approval expires pays, exactly once.
 */

const x = () => settingsOf(env).x402!;
const OTHER_PAY_TO = "0x0000000000000000000000000000000000000Abc";
const RESOURCE = REPORT_URL;
// A threshold of 1 cent; the payment is a cent and a quarter of a base unit's worth more: sub-cent exact.
const POLICY = { allowedX402Hosts: ["*"], approvalThresholdUsdCents: 1 };
const AMOUNT = "12345";

const entry = (over: Record<string, unknown> = {}) => v2Entry(AMOUNT, over);
const request = (over: Record<string, unknown> = {}, resource = RESOURCE) => v2Request(AMOUNT, over, resource);

const pay = (key: string, body: unknown, idempotencyKey?: string) =>
  api("POST", "/agent/x402/payments", {
    token: key,
    body,
    ...(idempotencyKey ? { headers: { "idempotency-key": idempotencyKey } } : {}),
  });
const grant = async (id: string) => api("POST", `/approvals/${id}/grant`, { token: await consoleToken() });
const reject = async (id: string) => api("POST", `/approvals/${id}/reject`, { token: await consoleToken() });

async function unitsOf(key: string): Promise<bigint> {
  const res = await api("GET", "/balance", { token: key });
  expect(res.status).toBe(200);
  return BigInt(res.body.balanceBaseUnits);
}

async function paymentsOf(key: string): Promise<Array<Record<string, string>>> {
  const res = await api("GET", "/agent/x402/payments?limit=100", { token: key });
  expect(res.status).toBe(200);
  return res.body.payments;
}

const approvalRow = (id: string) =>
  env.DB.prepare(
    `SELECT status, charge_id AS chargeId, merchant_id AS merchantId, resource, pay_to AS payTo,
       CAST(amount_base_units AS TEXT) AS amountBaseUnits, x402_payment_id AS paymentId FROM approvals WHERE id = ?`,
  )
    .bind(id)
    .first<Record<string, string | null>>();

/** An agent with 1 dollar and the 1-cent threshold, and its first request held: the 402's body. */
async function held() {
  const agent = await createAgent({ policy: POLICY, credit: 100 });
  const res = await pay(agent.apiKey, request());
  expect(res.status, res.text).toBe(402);
  return { agent, hold: res.body as { pendingApproval: true; approvalId: string; reason: string; expiresAt: string } };
}

/** Nothing moved for the agent: its whole dollar and no payment. */
async function untouched(key: string) {
  expect(await unitsOf(key)).toBe(1_000_000n);
  expect(await paymentsOf(key)).toEqual([]);
}

describe("outbound x402 over the approval threshold", () => {
  it("402 pendingApproval as the wallet's charge payments answer it; nothing signed or debited; asked again, the same approval", async () => {
    const { agent, hold } = await held();
    expect(Object.keys(hold).sort()).toEqual(["approvalId", "expiresAt", "pendingApproval", "reason"]);
    expect(hold).toMatchObject({ pendingApproval: true, reason: "requiere_aprobacion_humana" });
    expect(hold.approvalId).toMatch(/^apr_/);
    await untouched(agent.apiKey);
    expect(await approvalRow(hold.approvalId)).toEqual({
      status: "pending",
      chargeId: null,
      merchantId: null,
      resource: RESOURCE,
      payTo: PAY_TO,
      amountBaseUnits: AMOUNT,
      paymentId: null,
    });
    const again = await pay(agent.apiKey, request());
    expect(again.status).toBe(402);
    expect(again.body).toEqual(hold);
    // The approval.required event names what it is for, to the endpoints of no merchant.
    const events = await env.DB.prepare(
      "SELECT merchant_id AS merchantId, data FROM outbox_events WHERE type = 'approval.required' AND json_extract(data, '$.approvalId') = ?",
    )
      .bind(hold.approvalId)
      .all<{ merchantId: string | null; data: string }>();
    expect(events.results).toHaveLength(1);
    expect(events.results[0]!.merchantId).toBeNull();
    expect(JSON.parse(events.results[0]!.data)).toEqual({
      approvalId: hold.approvalId,
      reason: "requiere_aprobacion_humana",
      expiresAt: hold.expiresAt,
      chargeId: null,
      agentId: agent.agentId,
      merchantId: null,
      amountMinor: null,
      amountBaseUnits: AMOUNT,
      x402Payment: { resource: RESOURCE, payTo: PAY_TO, network: caip2(x().chainId), asset: getAddress(x().asset) },
    });
  });

  it("the console lists it with what it is for", async () => {
    const { agent, hold } = await held();
    const res = await api("GET", "/console/approvals?status=pending&limit=500", { token: await consoleToken() });
    expect(res.status).toBe(200);
    const listed = res.body.approvals.find((a: { approvalId: string }) => a.approvalId === hold.approvalId);
    expect(listed).toEqual({
      approvalId: hold.approvalId,
      chargeId: null,
      agentId: agent.agentId,
      merchantId: null,
      amountMinor: null,
      amountBaseUnits: AMOUNT,
      x402Payment: {
        resource: RESOURCE,
        payTo: PAY_TO,
        network: caip2(x().chainId),
        asset: getAddress(x().asset),
        paymentId: null,
      },
      reason: "requiere_aprobacion_humana",
      status: "pending",
      expiresAt: hold.expiresAt,
      createdAt: expect.any(String),
    });
  });

  it("a grant of a version 2 request covers the same request as a version 1 answer names it", async () => {
    const { agent, hold } = await held();
    expect((await grant(hold.approvalId)).status).toBe(200);
    const { network: _, amount: __, ...rest } = entry();
    const v1 = {
      resource: RESOURCE,
      paymentRequired: {
        x402Version: 1,
        accepts: [{ ...rest, network: x().network, maxAmountRequired: AMOUNT, resource: RESOURCE }],
      },
    };
    const paid = await pay(agent.apiKey, v1);
    expect(paid.status, paid.text).toBe(201);
    expect(paid.body.header.name).toBe("X-PAYMENT");
    expect((await approvalRow(hold.approvalId))!.paymentId).toBe(paid.body.payment.paymentId);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 12_345n);
  });

  it("granted: the grant pays nothing; the same request then pays once (201), and the next is held again", async () => {
    const { agent, hold } = await held();
    const granted = await grant(hold.approvalId);
    expect(granted.status, granted.text).toBe(200);
    expect(granted.body).toEqual({ approval: { approvalId: hold.approvalId, status: "granted" } });
    // Granting moved nothing: no charge, no debit, no payment.
    await untouched(agent.apiKey);
    const paid = await pay(agent.apiKey, request());
    expect(paid.status, paid.text).toBe(201);
    expect(paid.body.payment).toMatchObject({ resource: RESOURCE, payTo: PAY_TO, amountBaseUnits: AMOUNT });
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 12_345n);
    expect((await approvalRow(hold.approvalId))!.paymentId).toBe(paid.body.payment.paymentId);
    const audit = await env.DB.prepare("SELECT data FROM audit_events WHERE reference = ?")
      .bind(paid.body.payment.paymentId)
      .first<{ data: string }>();
    expect(JSON.parse(audit!.data)).toMatchObject({ approvalId: hold.approvalId, approvedBy: expect.any(String) });
    // Used: the same request again is held for a new approval, nothing more debited.
    const next = await pay(agent.apiKey, request());
    expect(next.status).toBe(402);
    expect(next.body.pendingApproval).toBe(true);
    expect(next.body.approvalId).not.toBe(hold.approvalId);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 12_345n);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
    // A second grant of the used approval is refused.
    expect((await grant(hold.approvalId)).body.error).toBe("approval_not_pending");
  });

  it("granted: the same request ten times at once signs and debits exactly one; the rest are held again", async () => {
    const { agent, hold } = await held();
    expect((await grant(hold.approvalId)).status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 10 }, () => pay(agent.apiKey, request())));
    const made = answers.filter((a) => a.status === 201);
    expect(made).toHaveLength(1);
    for (const a of answers.filter((a) => a.status !== 201)) {
      expect(a.status, a.text).toBe(402);
      expect(a.body.pendingApproval).toBe(true);
      expect(a.body.approvalId).not.toBe(hold.approvalId);
    }
    // One new approval holds all the others: asking again while it is pending answers that same one.
    expect(new Set(answers.filter((a) => a.status === 402).map((a) => a.body.approvalId)).size).toBe(1);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 12_345n);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
  });

  it("granted: another resource, payee or amount is not let through by it", async () => {
    const { agent, hold } = await held();
    expect((await grant(hold.approvalId)).status).toBe(200);
    const others = [
      request({}, "https://api.example/other"),
      request({ payTo: OTHER_PAY_TO }),
      request({ amount: "12346" }),
      request({ amount: "12344" }),
    ];
    for (const body of others) {
      const res = await pay(agent.apiKey, body);
      expect(res.status, res.text).toBe(402);
      expect(res.body.pendingApproval).toBe(true);
      expect(res.body.approvalId).not.toBe(hold.approvalId);
    }
    await untouched(agent.apiKey);
    expect((await approvalRow(hold.approvalId))!).toMatchObject({ status: "granted", paymentId: null });
    // It still lets its own request through.
    expect((await pay(agent.apiKey, request())).status).toBe(201);
  });

  it("granted: the balance still applies, and the approval stays unused until the request can pay", async () => {
    const agent = await createAgent({ policy: POLICY, credit: 1 });
    const body = request({ amount: "20000" });
    const hold = await pay(agent.apiKey, body);
    expect(hold.status).toBe(402);
    expect((await grant(hold.body.approvalId)).status).toBe(200);
    const poor = await pay(agent.apiKey, body);
    expect(poor.status).toBe(402);
    expect(poor.body.error).toBe("saldo_insuficiente");
    expect((await approvalRow(hold.body.approvalId))!.paymentId).toBeNull();
    expect(await unitsOf(agent.apiKey)).toBe(10_000n);
  });

  it("rejected: nothing goes through; the same request is held for a new approval", async () => {
    const { agent, hold } = await held();
    const rejected = await reject(hold.approvalId);
    expect(rejected.status).toBe(200);
    const res = await pay(agent.apiKey, request());
    expect(res.status).toBe(402);
    expect(res.body.approvalId).not.toBe(hold.approvalId);
    await untouched(agent.apiKey);
    expect((await approvalRow(hold.approvalId))!.status).toBe("rejected");
  });

  it("expired before the grant: the grant is refused and nothing goes through", async () => {
    const { agent, hold } = await held();
    await expire(hold.approvalId);
    const granted = await grant(hold.approvalId);
    expect(granted.status).toBe(409);
    expect(granted.body.error).toBe("approval_expired");
    const res = await pay(agent.apiKey, request());
    expect(res.status).toBe(402);
    expect(res.body.approvalId).not.toBe(hold.approvalId);
    await untouched(agent.apiKey);
  });

  it("granted, then expired before the request: nothing goes through", async () => {
    const { agent, hold } = await held();
    expect((await grant(hold.approvalId)).status).toBe(200);
    await expire(hold.approvalId);
    const res = await pay(agent.apiKey, request());
    expect(res.status).toBe(402);
    expect(res.body.pendingApproval).toBe(true);
    expect(res.body.approvalId).not.toBe(hold.approvalId);
    await untouched(agent.apiKey);
    expect((await approvalRow(hold.approvalId))!).toMatchObject({ status: "granted", paymentId: null });
  });

  it("a frozen agent's approval is not granted (409 agent_frozen) and stays pending", async () => {
    const { agent, hold } = await held();
    const token = await consoleToken();
    expect((await api("POST", `/console/agents/${agent.agentId}/freeze`, { token, body: {} })).status).toBe(200);
    const granted = await grant(hold.approvalId);
    expect(granted.status).toBe(409);
    expect(granted.body.error).toBe("agent_frozen");
    expect((await approvalRow(hold.approvalId))!.status).toBe("pending");
  });

  it("a grant with an Idempotency-Key answers the same again, and still pays nothing", async () => {
    const { agent, hold } = await held();
    const token = await consoleToken();
    const headers = { "idempotency-key": `grant-${crypto.randomUUID()}` };
    const first = await api("POST", `/approvals/${hold.approvalId}/grant`, { token, headers });
    expect(first.status, first.text).toBe(200);
    const again = await api("POST", `/approvals/${hold.approvalId}/grant`, { token, headers });
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    await untouched(agent.apiKey);
  });

  it("an Idempotency-Key answers the hold's 402 again, byte for byte", async () => {
    const agent = await createAgent({ policy: POLICY, credit: 100 });
    const key = `held-${crypto.randomUUID()}`;
    const first = await pay(agent.apiKey, request(), key);
    expect(first.status).toBe(402);
    const again = await pay(agent.apiKey, request(), key);
    expect(again.status).toBe(402);
    expect(again.text).toBe(first.text);
  });
});

describe("the console's pages", () => {
  it("the approvals page shows what an outbound approval is for; its grant pays nothing", async () => {
    const { agent, hold } = await held();
    const cookie = `console_session=${await consoleToken()}`;
    const page = await api("GET", "/console/ui/approvals", { headers: { cookie } });
    expect(page.status).toBe(200);
    const row = rowOf(page.text, `approval-${hold.approvalId}`);
    expect(row).toContain(RESOURCE);
    expect(row).toContain(PAY_TO);
    // The exact amount in dollars, with its places below a cent.
    expect(row).toContain("$0.012345");
    const csrf = /<input type="hidden" name="_csrf" value="([^"]*)"/.exec(page.text)![1]!;
    const granted = await api("POST", `/console/ui/approvals/${hold.approvalId}/grant`, {
      body: new URLSearchParams({ _csrf: csrf }).toString(),
      headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
    });
    expect(granted.status).toBe(303);
    expect(decodeURIComponent(granted.headers.get("location")!)).toContain(`x402 payment of ${RESOURCE}`);
    expect((await approvalRow(hold.approvalId))!.status).toBe("granted");
    await untouched(agent.apiKey);
  });

  it("the agent's page lists its x402 payments: amount, status, resource, payee", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 100 });
    const paid = await pay(agent.apiKey, request({ amount: "2500" }));
    expect(paid.status).toBe(201);
    const cookie = `console_session=${await consoleToken()}`;
    const page = await api("GET", `/console/ui/agents/${agent.agentId}`, { headers: { cookie } });
    expect(page.status).toBe(200);
    const row = rowOf(page.text, `x402-payment-${paid.body.payment.paymentId}`);
    expect(row).toContain("$0.0025");
    expect(row).toContain("authorized");
    expect(row).toContain(RESOURCE);
    expect(row).toContain(PAY_TO);
  });
});

const expire = (approvalId: string) =>
  env.DB.prepare("UPDATE approvals SET expires_at = ? WHERE id = ?")
    .bind(new Date(Date.now() - 60_000).toISOString(), approvalId)
    .run();

/** The table row with the given id, as HTML. */
function rowOf(html: string, id: string): string {
  const start = html.indexOf(`<tr id="${id}"`);
  expect(start, `a row ${id}`).toBeGreaterThanOrEqual(0);
  return html.slice(start, html.indexOf("</tr>", start));
}

describe("the plan that uses a granted approval", () => {
  it("lets one payment through: a second payment's plan is refused as the approval used; the first's again as recorded", async () => {
    const { agent, hold } = await held();
    expect((await grant(hold.approvalId)).status).toBe(200);
    const approval = { id: hold.approvalId, status: "granted" as const, reason: "", expiresAt: "", decidedBy: null };
    const planOf = (id: string, nonce: string) => {
      const createdAt = new Date().toISOString();
      const payment = {
        id,
        agentId: agent.agentId,
        resource: RESOURCE,
        payTo: PAY_TO,
        network: caip2(x().chainId),
        asset: x().asset,
        amountBaseUnits: 12_345n,
        nonce,
        validBefore: Math.floor(Date.now() / 1000) + 60,
        header: { name: "PAYMENT-SIGNATURE", value: "e30=" },
        recordedBlock: null,
        createdAt,
      };
      return usingApproval(agentX402PaymentPlan(payment, []), approval, id, createdAt);
    };
    const xpo = () => `xpo_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
    const first = planOf(xpo(), `0x${"a1".repeat(32)}`);
    const second = planOf(xpo(), `0x${"b2".repeat(32)}`);
    const ledger = ledgerOf(env, 0);
    expect((await ledger.commit(first)).kind).toBe("committed");
    expect(await ledger.commit(second)).toEqual({ kind: "refused", reason: X402_APPROVAL_USED });
    expect(await ledger.commit(first)).toEqual({ kind: "refused", reason: X402_OUT_RECORDED });
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 12_345n);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
  });
});
