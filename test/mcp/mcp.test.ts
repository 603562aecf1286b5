import { env, exports } from "cloudflare:workers";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it, vi } from "vitest";
import { setFaultHook } from "../../src/lib/faults";
import { verifyJws } from "../../src/proofs/keys";
import { api, BASE, consoleToken } from "../helpers/api";
import {
  balanceOf,
  createAgent,
  createCharge,
  createCheckoutLink,
  createMerchant,
  merchantBalance,
  payCharge,
} from "../helpers/factories";
import { waitFor } from "../helpers/wait";
import { callTool, connectAgent, type Exchange } from "./client";

const TOOL_NAMES = [
  "get_balance",
  "get_charge",
  "pay_charge",
  "pay_checkout_link",
  "view_paylink",
  "accept_paylink",
  "list_recent_payments",
  "pay_x402_resource",
];

async function newPaylink(merchantKey: string, body: Record<string, unknown>) {
  const res = await api("POST", "/merchant/paylinks", { token: merchantKey, body });
  expect(res.status).toBe(201);
  return res.body as { paylinkId: string; code: string };
}

const draw = (merchantKey: string, code: string, agentId: string, amountUsdCents: number) =>
  api("POST", `/merchant/paylinks/${code}/charge`, { token: merchantKey, body: { agentId, amountUsdCents } });

/** A raw MCP request, for what the SDK client would never send. */
const rawMcp = (method: string, headers: Record<string, string>, body?: unknown) =>
  exports.default.fetch(
    new Request(`${BASE}/mcp`, {
      method,
      headers: { accept: "application/json, text/event-stream", "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

describe("MCP endpoint: tools", () => {
  it("lists the tools, with strict input schemas that never take an agent id", async () => {
    const agent = await createAgent();
    const client = await connectAgent(agent.apiKey);
    expect(client.getServerVersion()?.name).toBe("agent-pay");
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(TOOL_NAMES);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe("object");
      expect(tool.inputSchema.additionalProperties, tool.name).toBe(false);
      expect(Object.keys(tool.inputSchema.properties ?? {}), tool.name).not.toContain("agentId");
      expect(tool.description, tool.name).toBeTruthy();
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get("pay_charge")!.inputSchema).toMatchObject({
      properties: { chargeId: { type: "string", minLength: 1, maxLength: 512 } },
      required: ["chargeId"],
    });
    expect(byName.get("pay_checkout_link")!.inputSchema.required).toEqual(["token"]);
    expect(byName.get("accept_paylink")!.inputSchema.required).toEqual(["code"]);
    expect(byName.get("get_balance")!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.get("pay_charge")!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
    });
    // Each call pays again: a client must not retry it blindly.
    expect(byName.get("pay_checkout_link")!.annotations).toMatchObject({ readOnlyHint: false, idempotentHint: false });
    await client.close();
  });

  it("get_balance answers what GET /balance answers", async () => {
    const agent = await createAgent({ credit: 12_345 });
    const client = await connectAgent(agent.apiKey);
    const result = await callTool(client, "get_balance");
    const http = await api("GET", "/balance", { token: agent.apiKey });
    expect(result.isError).toBe(false);
    expect(result.body).toEqual(http.body);
    expect(result.body).toMatchObject({ agentId: agent.agentId, balanceMinor: 12_345, currency: "USD" });
    // The text rendering carries the same JSON after a readable line.
    expect(result.text).toContain("123.45 USD");
    expect(JSON.parse(result.text.split("\n")[1]!)).toEqual(result.body);
  });

  it("pay_charge pays from the key's wallet with the API's fields; get_charge and list_recent_payments show it", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const charge = await createCharge(merchant.apiKey, 2_500, { description: "dataset", externalId: "ord-1" });
    const client = await connectAgent(agent.apiKey);

    const paid = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
    expect(paid.isError, paid.text).toBe(false);
    expect(paid.body).toEqual({
      paid: true,
      charge: expect.objectContaining({
        chargeId: charge.chargeId,
        agentId: agent.agentId,
        amountMinor: 2_500,
        status: "paid",
        method: "ledger",
        reference: expect.stringMatching(/^PAY_/),
      }),
      merchantBalanceMinor: 2_500,
      receipt: expect.any(String),
    });
    // The receipt is the one GET /charges/:chargeId/receipt serves, and verifies against the published keys.
    const served = await api("GET", `/charges/${charge.chargeId}/receipt`);
    expect(paid.body.receipt).toBe(served.body.receipt);
    const verdict = await verifyJws(paid.body.receipt, (await api("GET", "/.well-known/jwks.json")).body);
    expect(verdict).toMatchObject({
      ok: true,
      payload: { type: "charge", chargeId: charge.chargeId, payer: agent.agentId, amountMinor: 2_500 },
    });
    expect(await balanceOf(agent.apiKey)).toBe(7_500);
    expect(await merchantBalance(merchant.apiKey)).toBe(2_500);

    // The same fields as the HTTP route's answer for the same kind of payment.
    const other = await createCharge(merchant.apiKey, 100);
    const http = await payCharge(agent.apiKey, other.chargeId);
    expect(http.status).toBe(200);
    // The route's fields, and the receipt besides.
    expect(Object.keys(paid.body).sort()).toEqual([...Object.keys(http.body), "receipt"].sort());
    expect(Object.keys(paid.body.charge).sort()).toEqual(Object.keys(http.body.charge).sort());

    const read = await callTool(client, "get_charge", { chargeId: charge.chargeId });
    expect(read.isError).toBe(false);
    expect(read.body).toEqual({
      ...(await api("GET", `/charges/${charge.chargeId}`)).body,
      receipt: served.body.receipt,
    });
    expect(read.body).toMatchObject({ status: "paid", reference: paid.body.charge.reference, externalId: "ord-1" });

    const recent = await callTool(client, "list_recent_payments");
    expect(recent.isError).toBe(false);
    // Most recently paid first: the HTTP payment came second.
    expect(recent.body.charges.map((c: { chargeId: string }) => c.chargeId)).toEqual([other.chargeId, charge.chargeId]);
    const { receipt: _receipt, ...readCharge } = read.body;
    expect(recent.body.charges[1]).toEqual(readCharge);

    // Paying again is the route's 409, as a tool error, and moves nothing.
    const again = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
    expect(again).toMatchObject({ isError: true, body: { error: "charge_not_pending", status: 409 } });
    expect(await balanceOf(agent.apiKey)).toBe(7_400);
  });

  it("a policy limit is a tool error with the policy's reason, and nothing moves", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({
      credit: 100_000,
      policy: { maxPerTransactionUsdCents: 1_000, dailyLimitUsdCents: 1_500 },
    });
    const client = await connectAgent(agent.apiKey);

    const tooBig = await createCharge(merchant.apiKey, 1_001);
    const refused = await callTool(client, "pay_charge", { chargeId: tooBig.chargeId });
    expect(refused.isError).toBe(true);
    expect(refused.body).toEqual({ error: "excede_tope_por_transaccion", status: 402 });
    expect(refused.text).toContain("excede_tope_por_transaccion");
    expect(await balanceOf(agent.apiKey)).toBe(100_000);
    expect((await api("GET", `/charges/${tooBig.chargeId}`)).body.status).toBe("pending");

    // The daily limit counts what was paid through the API and through tools alike.
    expect((await payCharge(agent.apiKey, (await createCharge(merchant.apiKey, 1_000)).chargeId)).status).toBe(200);
    const overDay = await callTool(client, "pay_charge", {
      chargeId: (await createCharge(merchant.apiKey, 600)).chargeId,
    });
    expect(overDay.body).toEqual({ error: "excede_limite_diario", status: 402 });

    // An empty wallet is a 402 refusal too.
    const broke = await createAgent();
    const brokeClient = await connectAgent(broke.apiKey);
    const noFunds = await callTool(brokeClient, "pay_charge", {
      chargeId: (await createCharge(merchant.apiKey, 50)).chargeId,
    });
    expect(noFunds.body).toEqual({ error: "saldo_insuficiente", status: 402 });

    // A category allowlist refuses a checkout link the same way.
    const picky = await createAgent({ credit: 10_000, policy: { allowedCategories: ["data"] } });
    const travel = await createMerchant({ category: "travel" });
    const link = await createCheckoutLink(travel.apiKey, 100);
    const pickyClient = await connectAgent(picky.apiKey);
    expect((await callTool(pickyClient, "pay_checkout_link", { token: link.checkoutToken })).body).toEqual({
      error: "categoria_no_permitida",
      status: 402,
    });
    expect(await balanceOf(picky.apiKey)).toBe(10_000);
  });

  it("a payment over the approval threshold comes back as a hold, not an error, and pays once granted", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 500 } });
    const charge = await createCharge(merchant.apiKey, 800);
    const client = await connectAgent(agent.apiKey);

    const held = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
    expect(held.isError).toBe(false);
    expect(held.body).toEqual({
      pendingApproval: true,
      reason: "requiere_aprobacion_humana",
      approvalId: expect.stringMatching(/^apr_/),
      expiresAt: expect.any(String),
      charge: expect.objectContaining({ chargeId: charge.chargeId, status: "pending" }),
    });
    expect(held.body).not.toHaveProperty("receipt");
    expect(held.text).toContain("approval");
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    // Not paid yet: get_charge is the charge alone, with no receipt.
    expect((await callTool(client, "get_charge", { chargeId: charge.chargeId })).body).toEqual(
      (await api("GET", `/charges/${charge.chargeId}`)).body,
    );

    // Asking again returns the same approval, never a second one.
    const again = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
    expect(again.body.approvalId).toBe(held.body.approvalId);

    const granted = await api("POST", `/approvals/${held.body.approvalId}/grant`, { token: await consoleToken() });
    expect(granted.status).toBe(200);
    // Paid by the grant: get_charge now carries its receipt.
    expect((await callTool(client, "get_charge", { chargeId: charge.chargeId })).body).toMatchObject({
      status: "paid",
      agentId: agent.agentId,
      receipt: (await api("GET", `/charges/${charge.chargeId}/receipt`)).body.receipt,
    });
    expect((await callTool(client, "list_recent_payments")).body.charges[0]).toMatchObject({
      chargeId: charge.chargeId,
      status: "paid",
    });
    expect((await callTool(client, "get_balance")).body.balanceMinor).toBe(9_200);

    // A checkout link over the threshold is held the same way; the charge it was born with waits.
    const link = await createCheckoutLink(merchant.apiKey, 900);
    const linkHeld = await callTool(client, "pay_checkout_link", { token: link.checkoutToken });
    expect(linkHeld).toMatchObject({
      isError: false,
      body: { pendingApproval: true, reason: "requiere_aprobacion_humana", charge: { status: "pending" } },
    });
    expect(await balanceOf(agent.apiKey)).toBe(9_200);
  });

  it("pay_checkout_link pays a new charge each call; a disabled or unknown link is refused", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 300);
    const client = await connectAgent(agent.apiKey);

    const first = await callTool(client, "pay_checkout_link", { token: link.checkoutToken });
    expect(first.isError, first.text).toBe(false);
    // As POST /checkout/:token/pay: the agent's charge, not the merchant's balance.
    expect(first.body).toEqual({
      paid: true,
      charge: expect.objectContaining({ status: "paid", method: "ledger", amountMinor: 300, agentId: agent.agentId }),
      receipt: (await api("GET", `/charges/${first.body.charge.chargeId}/receipt`)).body.receipt,
    });
    const second = await callTool(client, "pay_checkout_link", { token: link.checkoutToken });
    expect(second.body.charge.chargeId).not.toBe(first.body.charge.chargeId);
    expect(await balanceOf(agent.apiKey)).toBe(400);
    const http = await api("POST", `/checkout/${link.checkoutToken}/pay`, { token: agent.apiKey });
    expect(http.status).toBe(200);
    expect(Object.keys(first.body).sort()).toEqual([...Object.keys(http.body), "receipt"].sort());

    const list = await api("GET", "/merchant/checkout-links", { token: merchant.apiKey });
    expect(list.body.links[0]).toMatchObject({
      checkoutLinkId: link.checkoutLinkId,
      paymentsCount: 3,
      totalPaidMinor: 900,
    });

    expect(
      (
        await api("PATCH", `/merchant/checkout-links/${link.checkoutToken}`, {
          token: merchant.apiKey,
          body: { active: false },
        })
      ).status,
    ).toBe(200);
    expect((await callTool(client, "pay_checkout_link", { token: link.checkoutToken })).body).toEqual({
      error: "checkout_link_disabled",
      status: 409,
    });
    expect((await callTool(client, "pay_checkout_link", { token: "cl_tok_unknown" })).body).toEqual({
      error: "checkout_link_not_found",
      status: 404,
    });
    expect(await balanceOf(agent.apiKey)).toBe(100);
  });

  it("view_paylink and accept_paylink: the public view, then a grant the merchant can draw on", async () => {
    const merchant = await createMerchant({ name: "Research Co" });
    const agent = await createAgent({ credit: 5_000 });
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 2_000, label: "research", perChargeUsdCents: 800 });
    const client = await connectAgent(agent.apiKey);

    const view = await callTool(client, "view_paylink", { code: pl.code });
    expect(view.isError).toBe(false);
    expect(view.body).toEqual((await api("GET", `/pl/${pl.code}`)).body);
    expect(view.body).toMatchObject({
      paylinkId: pl.paylinkId,
      business: "Research Co",
      label: "research",
      budgetMinor: 2_000,
      remainingMinor: 2_000,
      status: "active",
    });

    const accepted = await callTool(client, "accept_paylink", { code: pl.code });
    expect(accepted.isError, accepted.text).toBe(false);
    expect(accepted.body).toEqual({
      grantId: expect.stringMatching(/^plg_/),
      paylink: expect.objectContaining({ paylinkId: pl.paylinkId, uses: 0, remainingMinor: 2_000 }),
    });
    // Idempotent per (PayLink, agent), through the tool and the route alike.
    expect((await callTool(client, "accept_paylink", { code: pl.code })).body.grantId).toBe(accepted.body.grantId);
    expect((await api("POST", `/pl/${pl.code}/accept`, { token: agent.apiKey })).body.grantId).toBe(
      accepted.body.grantId,
    );

    const drawn = await draw(merchant.apiKey, pl.code, agent.agentId, 700);
    expect(drawn.status).toBe(200);
    expect((await callTool(client, "list_recent_payments")).body.charges[0]).toMatchObject({
      chargeId: drawn.body.charge.chargeId,
      method: "paylink",
      amountMinor: 700,
    });
    expect((await callTool(client, "accept_paylink", { code: pl.code })).body.paylink).toMatchObject({
      uses: 1,
      remainingMinor: 1_300,
    });

    expect((await callTool(client, "view_paylink", { code: "plc_unknown" })).body).toEqual({
      error: "paylink_not_found",
      status: 404,
    });
    expect((await callTool(client, "accept_paylink", { code: "plc_unknown" })).body).toEqual({
      error: "paylink_not_found",
      status: 404,
    });
  });

  it("list_recent_payments is the key's own paid charges, newest first, bounded by limit", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000 });
    const stranger = await createAgent({ credit: 10_000 });
    const client = await connectAgent(agent.apiKey);
    const mine: string[] = [];
    for (const amount of [101, 102, 103]) {
      const charge = await createCharge(merchant.apiKey, amount);
      expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
      mine.unshift(charge.chargeId);
    }
    const theirs = await createCharge(merchant.apiKey, 104);
    expect((await payCharge(stranger.apiKey, theirs.chargeId)).status).toBe(200);
    // Pending charges are not payments.
    await createCharge(merchant.apiKey, 105);

    const all = await callTool(client, "list_recent_payments", { limit: 100 });
    expect(all.body.charges.map((c: { chargeId: string }) => c.chargeId)).toEqual(mine);
    const two = await callTool(client, "list_recent_payments", { limit: 2 });
    expect(two.body.charges.map((c: { chargeId: string }) => c.chargeId)).toEqual(mine.slice(0, 2));
    expect(two.text).toContain("2 recent payments");
  });
});

describe("MCP endpoint: bad input and other agents", () => {
  it("bad input is the API's invalid_request as a tool error, and nothing is paid", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 100);
    const client = await connectAgent(agent.apiKey);

    const missing = await callTool(client, "pay_charge", {});
    expect(missing.isError).toBe(true);
    expect(missing.body).toMatchObject({
      error: "invalid_request",
      status: 400,
      issues: [expect.objectContaining({ path: "chargeId" })],
    });
    const wrongType = await callTool(client, "pay_charge", { chargeId: 42 });
    expect(wrongType.body).toMatchObject({
      error: "invalid_request",
      issues: [expect.objectContaining({ path: "chargeId", code: "invalid_type" })],
    });
    expect((await callTool(client, "get_charge", { chargeId: "c".repeat(513) })).body.error).toBe("invalid_request");
    // An unknown id of any sane length is the API's 404, as on GET /charges/:chargeId.
    expect((await callTool(client, "get_charge", { chargeId: "c".repeat(65) })).body).toMatchObject({
      error: "charge_not_found",
      status: 404,
    });
    expect((await callTool(client, "list_recent_payments", { limit: 0 })).body.error).toBe("invalid_request");
    expect((await callTool(client, "list_recent_payments", { limit: 101 })).body.error).toBe("invalid_request");
    expect((await callTool(client, "get_balance", { verbose: true })).body).toMatchObject({
      error: "invalid_request",
      issues: [expect.objectContaining({ code: "unrecognized_keys" })],
    });
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");

    // An unknown tool is a protocol error (invalid params), not a crash.
    const unknown = await client.callTool({ name: "transfer_funds", arguments: {} }).catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(ErrorCode.InvalidParams);
  });

  it("a tool cannot name another agent's wallet: an agentId argument is refused, and the key's wallet pays", async () => {
    const merchant = await createMerchant();
    const payer = await createAgent({ credit: 1_000 });
    const victim = await createAgent({ credit: 50_000 });
    const charge = await createCharge(merchant.apiKey, 400);
    const client = await connectAgent(payer.apiKey);

    for (const [tool, args] of [
      ["pay_charge", { chargeId: charge.chargeId, agentId: victim.agentId }],
      ["get_balance", { agentId: victim.agentId }],
      ["list_recent_payments", { agentId: victim.agentId }],
    ] as const) {
      const result = await callTool(client, tool, args);
      expect(result.body, tool).toMatchObject({
        error: "invalid_request",
        status: 400,
        issues: [expect.objectContaining({ code: "unrecognized_keys" })],
      });
    }
    expect(await balanceOf(victim.apiKey)).toBe(50_000);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");

    const paid = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
    expect(paid.body.charge.agentId).toBe(payer.agentId);
    expect(await balanceOf(payer.apiKey)).toBe(600);
    expect(await balanceOf(victim.apiKey)).toBe(50_000);
  });

  it("another agent's charge, hold and grant cannot be touched", async () => {
    const merchant = await createMerchant();
    const alice = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1_000 } });
    // Bob's payments of this size need a human too, so he meets Alice's hold rather than paying the charge outright.
    const bob = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1_000 } });
    const aliceClient = await connectAgent(alice.apiKey);
    const bobClient = await connectAgent(bob.apiKey);

    // A charge Alice paid: Bob cannot pay it again.
    const paidByAlice = await createCharge(merchant.apiKey, 300);
    expect((await callTool(aliceClient, "pay_charge", { chargeId: paidByAlice.chargeId })).isError).toBe(false);
    expect((await callTool(bobClient, "pay_charge", { chargeId: paidByAlice.chargeId })).body).toEqual({
      error: "charge_not_pending",
      status: 409,
    });

    // A charge held for Alice's approval: Bob's payment needs a human too, and gets an approval of his own, not hers.
    const heldForAlice = await createCharge(merchant.apiKey, 2_000);
    const held = await callTool(aliceClient, "pay_charge", { chargeId: heldForAlice.chargeId });
    expect(held.body.pendingApproval).toBe(true);
    const bobsHold = await callTool(bobClient, "pay_charge", { chargeId: heldForAlice.chargeId });
    expect(bobsHold.body.pendingApproval).toBe(true);
    expect(bobsHold.body.approvalId).not.toBe(held.body.approvalId);
    expect(await balanceOf(bob.apiKey)).toBe(10_000);

    // Bob's payments are his own; Alice's do not show in his list.
    const bobsList = await callTool(bobClient, "list_recent_payments");
    expect(bobsList.body.charges).toEqual([]);

    // A PayLink both accept: each gets a grant of their own, and a draw on Alice's leaves Bob's whole.
    const pl = await newPaylink(merchant.apiKey, { budgetUsdCents: 1_000 });
    const aliceGrant = (await callTool(aliceClient, "accept_paylink", { code: pl.code })).body;
    const bobGrant = (await callTool(bobClient, "accept_paylink", { code: pl.code })).body;
    expect(bobGrant.grantId).toMatch(/^plg_/);
    expect(bobGrant.grantId).not.toBe(aliceGrant.grantId);
    expect((await draw(merchant.apiKey, pl.code, alice.agentId, 600)).status).toBe(200);
    expect((await callTool(bobClient, "accept_paylink", { code: pl.code })).body.paylink).toMatchObject({
      uses: 0,
      remainingMinor: 1_000,
    });
    expect((await callTool(aliceClient, "accept_paylink", { code: pl.code })).body.paylink).toMatchObject({
      uses: 1,
      remainingMinor: 400,
    });
    expect(await balanceOf(bob.apiKey)).toBe(10_000);
  });
});

describe("MCP endpoint: failures", () => {
  it("an unexpected failure is an internal_error tool result with a request id, never the internal message", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 100);
    const client = await connectAgent(agent.apiKey);
    const logged: string[] = [];
    const errorLog = vi
      .spyOn(console, "error")
      .mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    setFaultHook((point) => {
      if (point === "payment.before_commit") throw new Error("injected fault at payment.before_commit");
    });
    try {
      const failed = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
      expect(failed.isError).toBe(true);
      expect(failed.body).toEqual({ error: "internal_error", status: 500, requestId: expect.any(String) });
      expect(failed.text).not.toContain("injected");
      // Logged once with its request id, and the key is nowhere in the log.
      expect(logged.some((line) => line.includes(failed.body.requestId) && line.includes("injected fault"))).toBe(true);
      expect(logged.join("\n")).not.toContain(agent.apiKey);
    } finally {
      setFaultHook(null);
      errorLog.mockRestore();
    }
    // Nothing was half-done: the charge is still payable, once.
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    expect((await callTool(client, "pay_charge", { chargeId: charge.chargeId })).body.charge.status).toBe("paid");
    expect(await balanceOf(agent.apiKey)).toBe(900);
  });
});

describe("MCP endpoint: HTTP", () => {
  it("a missing or invalid key is 401 naming the agent key; a merchant or console credential is 403", async () => {
    const merchant = await createMerchant();
    const noKey = await rawMcp("POST", {}, INITIALIZE);
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toEqual({ error: "agent_api_key_required" });
    const badKey = await rawMcp(
      "POST",
      { authorization: "Bearer svc_sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" },
      INITIALIZE,
    );
    expect(badKey.status).toBe(401);
    expect(await badKey.json()).toEqual({ error: "agent_api_key_required" });
    for (const token of [merchant.apiKey, await consoleToken()]) {
      const wrongKind = await rawMcp("POST", { authorization: `Bearer ${token}` }, INITIALIZE);
      expect(wrongKind.status).toBe(403);
      expect(await wrongKind.json()).toEqual({ error: "credential_not_allowed", expected: "agent_api_key" });
    }
    // The SDK client without a key fails to connect, and says why.
    await expect(connectAgent(undefined)).rejects.toThrow(/401|agent_api_key_required/);
    await expect(connectAgent(merchant.apiKey)).rejects.toThrow(/403|credential_not_allowed/);
  });

  it("stateless streamable HTTP: JSON answers, no session, and 405 for the stream GET and DELETE", async () => {
    const agent = await createAgent();
    const exchanges: Exchange[] = [];
    const client = await connectAgent(agent.apiKey, exchanges);
    await client.listTools();
    // The client asked for a server stream and was told there is none; nothing else failed. The SDK
    // opens that stream in the background once connected, so it may come after listTools' answer.
    const gets = await waitFor(
      "the client's stream GET",
      async () => exchanges.filter((e) => e.method === "GET"),
      (g) => g.length > 0,
    );
    expect(gets.map((e) => e.status)).toEqual([405]);
    expect(exchanges.filter((e) => e.method === "POST").every((e) => e.status === 200 || e.status === 202)).toBe(true);

    const init = await rawMcp("POST", { authorization: `Bearer ${agent.apiKey}` }, INITIALIZE);
    expect(init.status).toBe(200);
    expect(init.headers.get("content-type")).toContain("application/json");
    expect(init.headers.get("mcp-session-id")).toBeNull();
    expect(await init.json()).toMatchObject({
      jsonrpc: "2.0",
      id: 1,
      result: { serverInfo: { name: "agent-pay" }, capabilities: { tools: {} } },
    });

    for (const method of ["GET", "DELETE"]) {
      const res = await rawMcp(method, { authorization: `Bearer ${agent.apiKey}` });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
      expect(await res.json()).toEqual({ error: "method_not_allowed" });
    }
    await client.close();
  });

  it("ignores Idempotency-Key: the same key and body run again, never a stored JSON-RPC answer", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 500 });
    const link = (
      await api("POST", "/merchant/checkout", {
        token: merchant.apiKey,
        body: { amountUsdCents: 100, description: "one call" },
      })
    ).body;
    const headers = { authorization: `Bearer ${agent.apiKey}`, "idempotency-key": `mcp-${crypto.randomUUID()}` };
    const call = {
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "pay_checkout_link", arguments: { token: link.checkoutToken } },
    };
    for (const balance of [400, 300]) {
      const res = await rawMcp("POST", headers, call);
      expect(res.status).toBe(200);
      expect(res.headers.get("idempotent-replayed")).toBeNull();
      expect(await balanceOf(agent.apiKey)).toBe(balance);
    }
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE key = ?")
        .bind(headers["idempotency-key"])
        .first("n"),
    ).toBe(0);
  });

  it("a JSON-RPC batch is 400, and none of its calls runs", async () => {
    const agent = await createAgent({ credit: 500 });
    const calls = [1, 2].map((id) => ({
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: "get_balance", arguments: {} },
    }));
    const res = await rawMcp("POST", { authorization: `Bearer ${agent.apiKey}` }, calls);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
  });

  it("protocol-level failures are JSON-RPC errors in JSON, never a 5xx", async () => {
    const agent = await createAgent();
    const auth = { authorization: `Bearer ${agent.apiKey}` };
    const notAcceptable = await rawMcp("POST", { ...auth, accept: "application/json" }, INITIALIZE);
    expect(notAcceptable.status).toBe(406);
    expect(await notAcceptable.json()).toMatchObject({
      jsonrpc: "2.0",
      error: { code: -32000, message: expect.any(String) },
    });
    const broken = await exports.default.fetch(
      new Request(`${BASE}/mcp`, {
        method: "POST",
        headers: { ...auth, accept: "application/json, text/event-stream", "content-type": "application/json" },
        body: "{",
      }),
    );
    expect(broken.status).toBe(400);
    expect(await broken.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 } });
  });
});
