import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import { api, consoleToken } from "../helpers/api";
import {
  balanceOf,
  createAgent,
  createCharge,
  createCheckoutLink,
  createMerchant,
  creditAgent,
  merchantBalance,
} from "../helpers/factories";
import { callTool, connectAgent } from "./client";

/** Every charge made against a checkout link, and the paid ones among them. */
async function linkCharges(checkoutLinkId: string) {
  const row = await env.DB.prepare(
    "SELECT COUNT(*) AS made, SUM(status = 'paid') AS paid FROM charges WHERE checkout_link_id = ?",
  )
    .bind(checkoutLinkId)
    .first<{ made: number; paid: number | null }>();
  return { made: row!.made, paid: row!.paid ?? 0 };
}

const newKey = () => `purchase-${crypto.randomUUID()}`;

describe("MCP paying tools: idempotencyKey", () => {
  it("tools/list shows the optional idempotencyKey on the paying tools, and descriptions tell a model how to retry", async () => {
    const agent = await createAgent();
    const client = await connectAgent(agent.apiKey);
    const byName = new Map((await client.listTools()).tools.map((t) => [t.name, t]));
    for (const name of ["pay_charge", "pay_checkout_link"]) {
      const tool = byName.get(name)!;
      expect(tool.inputSchema.properties?.idempotencyKey, name).toMatchObject({
        type: "string",
        pattern: "^[\\x21-\\x7e]{1,255}$",
        description: expect.stringContaining("SAME key"),
      });
      expect(tool.inputSchema.required, name).not.toContain("idempotencyKey");
      expect(tool.description, name).toContain("SAME idempotencyKey");
      expect(tool.description, name).toContain("get_charge");
    }
    for (const name of ["get_balance", "get_charge", "view_paylink", "accept_paylink", "list_recent_payments"]) {
      expect(Object.keys(byName.get(name)!.inputSchema.properties ?? {}), name).not.toContain("idempotencyKey");
    }
    expect(client.getInstructions()).toContain("idempotencyKey");
    await client.close();
  });

  it("a retried pay_checkout_link with the same key pays once and answers the same charge", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 250);
    const client = await connectAgent(agent.apiKey);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };

    const first = await callTool(client, "pay_checkout_link", args);
    expect(first.isError).toBe(false);
    expect(first.body).toMatchObject({ paid: true, charge: { status: "paid", amountMinor: 250 } });
    expect(first.body.receipt).toEqual(expect.any(String));
    expect(first.text).not.toContain("Replayed");

    const retry = await callTool(client, "pay_checkout_link", args);
    expect(retry.isError).toBe(false);
    expect(retry.body).toEqual(first.body);
    expect(retry.text).toContain(first.body.charge.chargeId);
    expect(retry.text).toContain("Replayed");

    expect(await balanceOf(agent.apiKey)).toBe(750);
    expect(await merchantBalance(merchant.apiKey)).toBe(250);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    await client.close();
  });

  it("a retried pay_charge with the same key replays the paid answer, merchant balance included", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 120);
    const client = await connectAgent(agent.apiKey);
    const args = { chargeId: charge.chargeId, idempotencyKey: newKey() };

    const first = await callTool(client, "pay_charge", args);
    expect(first.body).toMatchObject({ paid: true, merchantBalanceMinor: 120, charge: { chargeId: charge.chargeId } });
    // Another payment to the merchant meanwhile: the replay is the first answer, not today's balance.
    await callTool(client, "pay_charge", { chargeId: (await createCharge(merchant.apiKey, 30)).chargeId });
    const retry = await callTool(client, "pay_charge", args);
    expect(retry.isError).toBe(false);
    expect(retry.body).toEqual(first.body);
    // Without the key the same call is the route's refusal: the charge is no longer pending.
    const unkeyed = await callTool(client, "pay_charge", { chargeId: charge.chargeId });
    expect(unkeyed.body).toEqual({ error: "charge_not_pending", status: 409 });
    expect(await balanceOf(agent.apiKey)).toBe(850);
    await client.close();
  });

  it("10 overlapping calls with one key make exactly one payment", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };
    const clients = await Promise.all(Array.from({ length: 10 }, () => connectAgent(agent.apiKey)));

    const results = await Promise.all(clients.map((client) => callTool(client, "pay_checkout_link", args)));
    const paid = results.filter((r) => !r.isError);
    const busy = results.filter((r) => r.isError);
    expect(paid.length).toBeGreaterThanOrEqual(1);
    for (const r of paid) expect(r.body).toEqual(paid[0]!.body);
    for (const r of busy) expect(r.body).toEqual({ error: "idempotency_key_in_use", status: 409 });
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    expect(await balanceOf(agent.apiKey)).toBe(4_900);

    // Once the first has finished, every repeat replays it.
    const after = await callTool(clients[0]!, "pay_checkout_link", args);
    expect(after.body).toEqual(paid[0]!.body);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    await Promise.all(clients.map((client) => client.close()));
  });

  it("the same key with other arguments is idempotency_key_reused, and pays nothing", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const [one, other] = [
      await createCheckoutLink(merchant.apiKey, 100),
      await createCheckoutLink(merchant.apiKey, 200),
    ];
    const client = await connectAgent(agent.apiKey);
    const idempotencyKey = newKey();

    expect((await callTool(client, "pay_checkout_link", { token: one.checkoutToken, idempotencyKey })).isError).toBe(
      false,
    );
    const reused = await callTool(client, "pay_checkout_link", { token: other.checkoutToken, idempotencyKey });
    expect(reused).toMatchObject({ isError: true, body: { error: "idempotency_key_reused", status: 409 } });
    // Another tool with the same key is another request too.
    const charge = await createCharge(merchant.apiKey, 50);
    const otherTool = await callTool(client, "pay_charge", { chargeId: charge.chargeId, idempotencyKey });
    expect(otherTool.body).toEqual({ error: "idempotency_key_reused", status: 409 });
    expect(await linkCharges(other.checkoutLinkId)).toEqual({ made: 0, paid: 0 });
    expect(await balanceOf(agent.apiKey)).toBe(900);
    await client.close();
  });

  it("an HTTP request and a tool call never replay each other's answers under one key", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const key = newKey();
    const http = await api("POST", `/checkout/${link.checkoutToken}/pay`, {
      token: agent.apiKey,
      headers: { "idempotency-key": key },
    });
    expect(http.status).toBe(200);
    const client = await connectAgent(agent.apiKey);
    const tool = await callTool(client, "pay_checkout_link", { token: link.checkoutToken, idempotencyKey: key });
    expect(tool.body).toEqual({ error: "idempotency_key_reused", status: 409 });
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    await client.close();
  });

  it("without a key every call is a new payment, as before", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const client = await connectAgent(agent.apiKey);
    const first = await callTool(client, "pay_checkout_link", { token: link.checkoutToken });
    const second = await callTool(client, "pay_checkout_link", { token: link.checkoutToken });
    expect(first.body.charge.chargeId).not.toBe(second.body.charge.chargeId);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 2, paid: 2 });
    expect(await balanceOf(agent.apiKey)).toBe(800);
    await client.close();
  });

  it("a key is the agent's own: another agent's same key pays its own purchase", async () => {
    const merchant = await createMerchant();
    const [alice, bob] = [await createAgent({ credit: 1_000 }), await createAgent({ credit: 1_000 })];
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };
    const [aliceClient, bobClient] = [await connectAgent(alice.apiKey), await connectAgent(bob.apiKey)];

    const paidByAlice = await callTool(aliceClient, "pay_checkout_link", args);
    const paidByBob = await callTool(bobClient, "pay_checkout_link", args);
    expect(paidByBob.isError).toBe(false);
    expect(paidByBob.text).not.toContain("Replayed");
    expect(paidByBob.body.charge.chargeId).not.toBe(paidByAlice.body.charge.chargeId);
    expect(paidByBob.body.charge.agentId).toBe(bob.agentId);
    expect([await balanceOf(alice.apiKey), await balanceOf(bob.apiKey)]).toEqual([900, 900]);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 2, paid: 2 });
    await Promise.all([aliceClient.close(), bobClient.close()]);
  });

  it("an approval hold under a key replays the same approval; without the key a new one is made", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 500 } });
    const link = await createCheckoutLink(merchant.apiKey, 800);
    const client = await connectAgent(agent.apiKey);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };

    const held = await callTool(client, "pay_checkout_link", args);
    expect(held.isError).toBe(false);
    expect(held.body).toMatchObject({ pendingApproval: true, approvalId: expect.stringMatching(/^apr_/) });
    expect(held.text).toContain(held.body.charge.chargeId);
    const again = await callTool(client, "pay_checkout_link", args);
    expect(again.body).toEqual(held.body);
    expect(again.text).toContain("Replayed");
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 0 });

    const unkeyed = await callTool(client, "pay_checkout_link", { token: link.checkoutToken });
    expect(unkeyed.body.approvalId).not.toBe(held.body.approvalId);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 2, paid: 0 });
    expect(await balanceOf(agent.apiKey)).toBe(10_000);
    await client.close();
  });

  it("a refusal the route keeps is replayed; one it does not keep frees the key", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 100 });
    const link = await createCheckoutLink(merchant.apiKey, 300);
    const client = await connectAgent(agent.apiKey);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };

    // 402 for the balance is the key's answer, as over HTTP: topped up, the same key still answers it.
    const refused = await callTool(client, "pay_checkout_link", args);
    expect(refused).toMatchObject({ isError: true, body: { status: 402, error: "saldo_insuficiente" } });
    await creditAgent(agent.agentId, 1_000);
    expect((await callTool(client, "pay_checkout_link", args)).body).toEqual(refused.body);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 0, paid: 0 });

    // 403 agent_frozen is not kept: once unfrozen, the same key pays.
    const frozenKey = { token: link.checkoutToken, idempotencyKey: newKey() };
    expect((await api("POST", `/console/agents/${agent.agentId}/freeze`, { token: await consoleToken() })).status).toBe(
      200,
    );
    expect((await callTool(client, "pay_checkout_link", frozenKey)).body).toEqual({
      error: "agent_frozen",
      status: 403,
    });
    expect(
      (await api("POST", `/console/agents/${agent.agentId}/unfreeze`, { token: await consoleToken() })).status,
    ).toBe(200);
    const paid = await callTool(client, "pay_checkout_link", frozenKey);
    expect(paid.body).toMatchObject({ paid: true });
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    await client.close();
  });

  /** Where a payment can crash, and whether its batch had landed by then (the retry replays) or not (it pays). */
  const CRASHES: [FaultPoint, "throw" | "abort", "replays" | "pays"][] = [
    ["payment.before_commit", "throw", "pays"],
    ["ledger.after_batch", "abort", "replays"],
    ["payment.after_commit", "throw", "replays"],
    ["idempotency.before_store", "throw", "replays"],
  ];
  for (const [point, mode, retried] of CRASHES) {
    it(`${mode} at ${point}: the retry with the same key ${retried}, and the link is paid exactly once`, async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 1_000 });
      const link = await createCheckoutLink(merchant.apiKey, 100);
      const client = await connectAgent(agent.apiKey);
      const args = { token: link.checkoutToken, idempotencyKey: newKey() };
      const errorLog = vi.spyOn(console, "error").mockImplementation(() => {});
      let fired = false;
      setFaultHook((at, context) => {
        if (fired || at !== point) return;
        fired = true;
        if (mode === "abort") context.abort?.();
        throw new Error(`injected fault at ${point}`);
      });
      let first: Awaited<ReturnType<typeof callTool>>;
      try {
        first = await callTool(client, "pay_checkout_link", args);
      } finally {
        setFaultHook(null);
        errorLog.mockRestore();
      }
      expect(fired).toBe(true);
      // A payment whose ledger call failed after its batch landed finds its charge paid and says so.
      if (first.isError) expect(first.body).toMatchObject({ error: "internal_error", status: 500 });
      else expect(first.body).toMatchObject({ paid: true });

      const retry = await callTool(client, "pay_checkout_link", args);
      expect(retry.isError).toBe(false);
      expect(retry.body).toMatchObject({ paid: true, charge: { status: "paid", amountMinor: 100 } });
      // After the batch, its answer was stored in the batch itself: the retry replays it.
      expect(retry.text.includes("Replayed")).toBe(retried === "replays");
      if (!first.isError) expect(retry.body).toEqual(first.body);
      expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
      expect(await balanceOf(agent.apiKey)).toBe(900);
      await client.close();
    });
  }

  it("a key of the wrong shape is 400 invalid_request naming idempotencyKey, and pays nothing", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const client = await connectAgent(agent.apiKey);
    for (const idempotencyKey of ["", "has space", "x".repeat(256), "ñandú", 42]) {
      const bad = await callTool(client, "pay_checkout_link", { token: link.checkoutToken, idempotencyKey });
      expect(bad.isError, String(idempotencyKey)).toBe(true);
      expect(bad.body).toMatchObject({
        error: "invalid_request",
        status: 400,
        issues: [expect.objectContaining({ path: "idempotencyKey" })],
      });
    }
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 0, paid: 0 });
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    await client.close();
  });
});
