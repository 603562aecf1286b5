import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { KEY_WAIT_MS } from "../../src/auth/idempotency";
import { ABANDONED_AFTER_MS, IDEMPOTENCY_TTL_MS, releaseReservation, storeAnswer } from "../../src/db/idempotency";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import { nowIso } from "../../src/lib/time";
import { toolKey } from "../../src/mcp/paying";
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
import { waitFor } from "../helpers/wait";
import { callTool, connectAgent, type ToolCall } from "./client";

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
      // Calls at once under one key are safe, and the model is told so.
      expect(tool.description, name).toContain("also when the calls run at the same time");
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

/** The agent's debits in the ledger: how many entries, and their sum. */
async function debits(agentId: string) {
  const row = await env.DB.prepare(
    "SELECT COUNT(*) AS entries, COALESCE(SUM(amount_minor), 0) AS total FROM ledger_entries WHERE account = ? AND amount_minor < 0",
  )
    .bind(`agent:${agentId}`)
    .first<{ entries: number; total: number }>();
  return row!;
}

/**
 * A first call under `key` that is still running, as another request would leave it: its
 * reservation, made `ageMs` ago, exactly as the tool makes it. `free` ends it as a failed call does
 * (no answer kept), `answer` as a call whose answer is kept.
 */
async function runningFirst(agentId: string, tool: string, key: string, args: Record<string, unknown>, ageMs = 0) {
  const { db, keyed } = await toolKey(env, agentId, tool, key, args);
  const since = Date.now() - ageMs;
  await db
    .prepare(
      "INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at) VALUES (?, ?, ?, 'in_progress', ?, ?)",
    )
    .bind(keyed.scope, keyed.key, keyed.requestHash, nowIso(since), nowIso(since + IDEMPOTENCY_TTL_MS))
    .run();
  const slot = { scope: keyed.scope, key: keyed.key, reservedAt: nowIso(since) };
  return {
    free: () => releaseReservation(db, slot),
    answer: (status: number, body: object) => storeAnswer(db, slot, status, JSON.stringify(body), "application/json"),
    status: async () =>
      (
        await db
          .prepare("SELECT status FROM idempotency_keys WHERE scope = ? AND key = ?")
          .bind(slot.scope, slot.key)
          .first<{
            status: string;
          }>()
      )?.status,
  };
}

/**
 * Counts the calls that begin to wait for a first call under their key. (A plain count the test
 * polls: a promise resolved from a call's request would be resolved from another request context.)
 */
function countWaits() {
  const waits = { count: 0 };
  setFaultHook((at) => {
    if (at === "idempotency.waiting") waits.count++;
  });
  return waits;
}

/** Until `count` calls wait: each waits once before its first call can change anything. */
const waitsReach = (waits: { count: number }, count: number) =>
  waitFor(
    `${count} calls waiting`,
    async () => waits.count,
    (seen) => seen >= count,
  );

const replayed = (call: ToolCall) => call.text.includes("Replayed");

describe("MCP paying tools: calls with one idempotencyKey at once", () => {
  /** A purchase each paying tool makes, and what to read afterwards to see it made once. */
  const PURCHASES = {
    pay_charge: async (merchantKey: string) => {
      const { chargeId } = await createCharge(merchantKey, 100);
      return { args: { chargeId }, made: async () => ({ made: 1, paid: 1 }) };
    },
    pay_checkout_link: async (merchantKey: string) => {
      const link = await createCheckoutLink(merchantKey, 100);
      return { args: { token: link.checkoutToken }, made: () => linkCharges(link.checkoutLinkId) };
    },
  };

  for (const [tool, purchase] of Object.entries(PURCHASES)) {
    it(`three ${tool} calls at once: one payment, and all three answer it (the later two replayed)`, async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 1_000 });
      const { args, made } = await purchase(merchant.apiKey);
      const keyed = { ...args, idempotencyKey: newKey() };
      const clients = await Promise.all([1, 2, 3].map(() => connectAgent(agent.apiKey)));

      const calls = await Promise.all(clients.map((client) => callTool(client, tool, keyed)));
      for (const call of calls) {
        expect(call.isError, call.text).toBe(false);
        expect(call.body).toEqual(calls[0]!.body);
      }
      expect(calls[0]!.body).toMatchObject({ paid: true, charge: { status: "paid", amountMinor: 100 } });
      expect(calls.map(replayed).sort()).toEqual([false, true, true]);
      expect(await debits(agent.agentId)).toEqual({ entries: 1, total: -100 });
      expect(await balanceOf(agent.apiKey)).toBe(900);
      expect(await merchantBalance(merchant.apiKey)).toBe(100);
      expect(await made()).toEqual({ made: 1, paid: 1 });
      // Once it has finished, a repeat replays it too.
      expect((await callTool(clients[0]!, tool, keyed)).body).toEqual(calls[0]!.body);
      await Promise.all(clients.map((client) => client.close()));
    });
  }

  it("three calls at once over the approval threshold: one approval, and all three answer it", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 500 } });
    const link = await createCheckoutLink(merchant.apiKey, 800);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };
    const clients = await Promise.all([1, 2, 3].map(() => connectAgent(agent.apiKey)));

    const calls = await Promise.all(clients.map((client) => callTool(client, "pay_checkout_link", args)));
    for (const call of calls) {
      expect(call.isError, call.text).toBe(false);
      expect(call.body).toEqual(calls[0]!.body);
    }
    expect(calls[0]!.body).toMatchObject({ pendingApproval: true, approvalId: expect.stringMatching(/^apr_/) });
    expect(calls.map(replayed).sort()).toEqual([false, true, true]);
    const approvals = await env.DB.prepare("SELECT id FROM approvals WHERE agent_id = ?").bind(agent.agentId).all();
    expect(approvals.results).toEqual([{ id: calls[0]!.body.approvalId }]);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 0 });
    expect(await debits(agent.agentId)).toEqual({ entries: 0, total: 0 });
    await Promise.all(clients.map((client) => client.close()));
  });

  it("calls waiting on a first that keeps its answer all replay it", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const idempotencyKey = newKey();
    const first = await runningFirst(agent.agentId, "pay_checkout_link", idempotencyKey, { token: link.checkoutToken });
    const clients = await Promise.all([1, 2, 3].map(() => connectAgent(agent.apiKey)));
    const waits = countWaits();
    try {
      const calls = Promise.all(
        clients.map((client) => callTool(client, "pay_checkout_link", { token: link.checkoutToken, idempotencyKey })),
      );
      await waitsReach(waits, 3);
      // The first ends in a refusal that is the key's answer (402 for the balance, say).
      await first.answer(402, { error: "saldo_insuficiente" });
      for (const call of await calls) {
        expect(call).toMatchObject({ isError: true, body: { error: "saldo_insuficiente", status: 402 } });
      }
    } finally {
      setFaultHook(null);
    }
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 0, paid: 0 });
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    await Promise.all(clients.map((client) => client.close()));
  });

  it("calls waiting on a first that keeps no answer (it failed): one of them pays, the others replay it", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const idempotencyKey = newKey();
    const first = await runningFirst(agent.agentId, "pay_checkout_link", idempotencyKey, { token: link.checkoutToken });
    const clients = await Promise.all([1, 2, 3].map(() => connectAgent(agent.apiKey)));
    const waits = countWaits();
    let calls: ToolCall[];
    try {
      const running = Promise.all(
        clients.map((client) => callTool(client, "pay_checkout_link", { token: link.checkoutToken, idempotencyKey })),
      );
      await waitsReach(waits, 3);
      // The first failed (a 5xx) and freed its key, as a retry after it would find it.
      await first.free();
      calls = await running;
    } finally {
      setFaultHook(null);
    }
    for (const call of calls) {
      expect(call.isError, call.text).toBe(false);
      expect(call.body).toEqual(calls[0]!.body);
    }
    expect(calls[0]!.body).toMatchObject({ paid: true, charge: { status: "paid", amountMinor: 100 } });
    expect(calls.map(replayed).sort()).toEqual([false, true, true]);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    expect(await debits(agent.agentId)).toEqual({ entries: 1, total: -100 });
    await Promise.all(clients.map((client) => client.close()));
  });

  it("a first still running after the wait: a repeat is 409 idempotency_key_in_use and pays nothing", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };
    // Reserved as long ago as a repeat waits (not yet abandoned, which would let the repeat take it over).
    expect(KEY_WAIT_MS).toBeLessThan(ABANDONED_AFTER_MS);
    const first = await runningFirst(
      agent.agentId,
      "pay_checkout_link",
      args.idempotencyKey,
      { token: args.token },
      KEY_WAIT_MS,
    );
    const client = await connectAgent(agent.apiKey);

    const busy = await callTool(client, "pay_checkout_link", args);
    expect(busy).toMatchObject({ isError: true, body: { error: "idempotency_key_in_use", status: 409 } });
    expect(await first.status()).toBe("in_progress");
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 0, paid: 0 });
    expect(await balanceOf(agent.apiKey)).toBe(1_000);

    // Once the first is gone without an answer, the same call pays.
    await first.free();
    expect((await callTool(client, "pay_checkout_link", args)).body).toMatchObject({ paid: true });
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    await client.close();
  });

  it("other arguments under a key in use: 409 idempotency_key_reused at once, no waiting", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const [one, other] = [
      await createCheckoutLink(merchant.apiKey, 100),
      await createCheckoutLink(merchant.apiKey, 200),
    ];
    const idempotencyKey = newKey();
    const first = await runningFirst(agent.agentId, "pay_checkout_link", idempotencyKey, { token: one.checkoutToken });
    const client = await connectAgent(agent.apiKey);
    const waits = countWaits();
    try {
      const reused = await callTool(client, "pay_checkout_link", { token: other.checkoutToken, idempotencyKey });
      expect(reused).toMatchObject({ isError: true, body: { error: "idempotency_key_reused", status: 409 } });
    } finally {
      setFaultHook(null);
    }
    expect(waits.count).toBe(0);
    expect(await first.status()).toBe("in_progress");
    expect(await linkCharges(other.checkoutLinkId)).toEqual({ made: 0, paid: 0 });
    await client.close();
  });

  it("two calls at once with one key and other arguments: one pays, the other is idempotency_key_reused", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1_000 });
    const links = [await createCheckoutLink(merchant.apiKey, 100), await createCheckoutLink(merchant.apiKey, 200)];
    const idempotencyKey = newKey();
    const clients = await Promise.all(links.map(() => connectAgent(agent.apiKey)));

    const calls = await Promise.all(
      links.map((link, i) => callTool(clients[i]!, "pay_checkout_link", { token: link.checkoutToken, idempotencyKey })),
    );
    const paid = calls.filter((call) => !call.isError);
    expect(paid).toHaveLength(1);
    expect(calls.find((call) => call.isError)!.body).toEqual({ error: "idempotency_key_reused", status: 409 });
    const made = await Promise.all(links.map((link) => linkCharges(link.checkoutLinkId)));
    expect(made.map((m) => m.paid).sort()).toEqual([0, 1]);
    expect(await debits(agent.agentId)).toEqual({ entries: 1, total: -paid[0]!.body.charge.amountMinor });
    await Promise.all(clients.map((client) => client.close()));
  });

  it("ten calls at once with one key: one payment, every call answers it", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 5_000 });
    const link = await createCheckoutLink(merchant.apiKey, 100);
    const args = { token: link.checkoutToken, idempotencyKey: newKey() };
    const clients = await Promise.all(Array.from({ length: 10 }, () => connectAgent(agent.apiKey)));

    const calls = await Promise.all(clients.map((client) => callTool(client, "pay_checkout_link", args)));
    for (const call of calls) expect(call.body).toEqual(calls[0]!.body);
    expect(calls[0]!.body).toMatchObject({ paid: true });
    expect(calls.filter((call) => !replayed(call))).toHaveLength(1);
    expect(await linkCharges(link.checkoutLinkId)).toEqual({ made: 1, paid: 1 });
    expect(await balanceOf(agent.apiKey)).toBe(4_900);
    await Promise.all(clients.map((client) => client.close()));
  });
});
