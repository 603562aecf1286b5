import { describe, expect, it } from "vitest";
import { shardOfId } from "../../src/db/shards";
import { api, consoleToken } from "../helpers/api";
import { v1Request } from "../helpers/paywall-terms";
import { agentOn, expectShardsAtRest, homeBalance } from "./helpers";

// An agent of shard 1 pays an x402 paywall anywhere: the payment, its debit, its audit row and the
// keyed answer all live in the agent's home, and its id says so.

/** A version 1 402 for a report priced 3 cents (30,000 base units), on the service's rails. */
const reportPayment = () => v1Request("30000");

describe("a shard-1 agent pays an x402 paywall", () => {
  it("201 with an xpo_s1_ payment, debited in shard 1, read back there, the same header for the same key", async () => {
    const agent = await agentOn(1, { credit: 100, policy: { allowedX402Hosts: ["*"] } });
    const body = reportPayment();
    const key = `shard-1-${crypto.randomUUID()}`;
    const headers = { "idempotency-key": key };
    const res = await api("POST", "/agent/x402/payments", { token: agent.apiKey, body, headers });
    expect(res.status, res.text).toBe(201);
    const { paymentId } = res.body.payment;
    expect(paymentId).toMatch(/^xpo_s1_/);
    expect(shardOfId(paymentId)).toBe(1);
    expect(await homeBalance("agent", agent.agentId)).toBe(97);

    const again = await api("POST", "/agent/x402/payments", { token: agent.apiKey, body, headers });
    expect(again.status).toBe(201);
    expect(again.text).toBe(res.text);
    expect(await homeBalance("agent", agent.agentId)).toBe(97);

    const one = await api("GET", `/agent/x402/payments/${paymentId}`, { token: agent.apiKey });
    expect(one.body.payment).toEqual(res.body.payment);
    const listed = await api("GET", `/console/agents/${agent.agentId}/x402/payments`, { token: await consoleToken() });
    expect(listed.body.payments).toEqual([res.body.payment]);
    await expectShardsAtRest();
  });
});

describe("a shard-1 agent's outbound payment over its approval threshold", () => {
  it("held in shard 1 (an apr_s1_ approval), granted there without paying, then the same request pays once", async () => {
    const agent = await agentOn(1, { credit: 100, policy: { allowedX402Hosts: ["*"], approvalThresholdUsdCents: 1 } });
    const body = reportPayment();
    const pay = () => api("POST", "/agent/x402/payments", { token: agent.apiKey, body });
    const held = await pay();
    expect(held.status, held.text).toBe(402);
    expect(held.body.approvalId).toMatch(/^apr_s1_/);
    const granted = await api("POST", `/approvals/${held.body.approvalId}/grant`, { token: await consoleToken() });
    expect(granted.status, granted.text).toBe(200);
    expect(await homeBalance("agent", agent.agentId)).toBe(100);
    const paid = await pay();
    expect(paid.status, paid.text).toBe(201);
    expect(await homeBalance("agent", agent.agentId)).toBe(97);
    const again = await pay();
    expect(again.status).toBe(402);
    expect(again.body.approvalId).not.toBe(held.body.approvalId);
    expect(await homeBalance("agent", agent.agentId)).toBe(97);
    await expectShardsAtRest();
  });
});
