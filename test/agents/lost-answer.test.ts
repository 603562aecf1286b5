import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { payCharge as payFromWallet, payNewCharge } from "../../src/agents/wallet";
import { AgentStateCache, readCharge } from "../../src/agents/wallet-state";
import { newPendingCharge } from "../../src/charges/service";
import { CHECKOUT_PAID_VIEW, checkoutLinkForPayment } from "../../src/checkout/service";
import { IDEMPOTENCY_TTL_MS, releaseReservation } from "../../src/db/idempotency";
import type { CommitResult } from "../../src/ledger/ledger.do";
import { ledgerOf } from "../../src/ledger/ledger.do";
import type { CommitPlan } from "../../src/ledger/plan";
import { sha256Hex } from "../../src/lib/crypto";
import { CONTROL_IDS } from "../../src/lib/ids";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance } from "../helpers/factories";

/*
 * A group batch that committed but whose answer was lost: the ledger
 * sequencer commits each of its plans again one by one, and a wallet payment's
 * second try is refused charge_not_pending, its charge being paid by itself.
 * The payment is answered as paid (not 409), once, with the merchant's balance,
 * and the wallet counts it in its remembered figures.
 */

/** `env` whose ledger commits every plan, loses the answer, and commits it again (what the sequencer does after a lost group answer). */
function lossyEnv() {
  const real = ledgerOf(env, 0);
  const ledger = {
    commit: async (plan: CommitPlan) => {
      await real.commit(plan);
      return real.commit(plan);
    },
  };
  return { ...env, LEDGER: { getByName: () => ledger } } as unknown as typeof env;
}

describe("a wallet payment whose batch committed but whose answer was lost", () => {
  it("is answered as paid, once, and the wallet's figures count it", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000, policy: { dailyLimitUsdCents: 500 } });
    const charge = await createCharge(merchant.apiKey, 300);
    const turn = { cache: new AgentStateCache(), endTurn: () => {} };
    const lossy = lossyEnv();

    const outcome = await payFromWallet(
      { env: lossy, agentId: agent.agentId, turn },
      charge.chargeId,
      readCharge(env, charge.chargeId),
    );
    expect(outcome).toMatchObject({
      kind: "paid",
      charge: { chargeId: charge.chargeId, status: "paid" },
      merchantBalanceMinor: 300,
    });
    expect(await balanceOf(agent.apiKey)).toBe(700);
    expect(await merchantBalance(merchant.apiKey)).toBe(300);
    const entries = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM ledger_entries e JOIN charges c ON e.transfer_id = c.reference WHERE c.id = ?",
    )
      .bind(charge.chargeId)
      .first<{ n: number }>();
    expect(entries?.n).toBe(2);

    // The same wallet's next decision sees the 300 spent today: 300 more would pass the 500 daily limit.
    const next = await createCharge(merchant.apiKey, 300);
    const refused = await payFromWallet(
      { env: lossy, agentId: agent.agentId, turn },
      next.chargeId,
      readCharge(env, next.chargeId),
    );
    expect(refused).toEqual({ kind: "rejected", reason: "excede_limite_diario" });
    expect((await api("GET", "/console/audit/verify", { token: await consoleToken() })).body.ok).toBe(true);
  });

  it("the answer names the merchant's balance right after this payment, not after later ones", async () => {
    const merchant = await createMerchant();
    const [agent, other] = await Promise.all([createAgent({ credit: 1000 }), createAgent({ credit: 1000 })]);
    const [charge, later] = await Promise.all([createCharge(merchant.apiKey, 300), createCharge(merchant.apiKey, 200)]);
    const real = ledgerOf(env, 0);
    // The batch lands, its answer is lost, another payment to the same merchant lands, then the plan is tried again.
    const ledger = {
      commit: async (plan: CommitPlan) => {
        await real.commit(plan);
        expect((await api("POST", `/charges/${later.chargeId}/pay`, { token: other.apiKey })).status).toBe(200);
        return real.commit(plan);
      },
    };
    const lossy = { ...env, LEDGER: { getByName: () => ledger } } as unknown as typeof env;
    const outcome = await payFromWallet(
      { env: lossy, agentId: agent.agentId, turn: { cache: new AgentStateCache(), endTurn: () => {} } },
      charge.chargeId,
      readCharge(env, charge.chargeId),
    );
    expect(outcome).toMatchObject({ kind: "paid", merchantBalanceMinor: 300 });
    expect(await merchantBalance(merchant.apiKey)).toBe(500);
  });

  it("a charge another payment paid is still 409 charge_not_pending", async () => {
    const merchant = await createMerchant();
    const [first, second] = await Promise.all([createAgent({ credit: 1000 }), createAgent({ credit: 1000 })]);
    const charge = await createCharge(merchant.apiKey, 300);
    expect((await api("POST", `/charges/${charge.chargeId}/pay`, { token: first.apiKey })).status).toBe(200);
    const turn = { cache: new AgentStateCache(), endTurn: () => {} };
    // The charge as it was before the first payment: the second agent's decision is made on it, and its batch is refused.
    const stale = Promise.resolve({
      ...(await readCharge(env, charge.chargeId))!,
      status: "pending",
      reference: null,
      agentId: null,
      method: null,
      paidAt: null,
    });
    const outcome = await payFromWallet({ env: lossyEnv(), agentId: second.agentId, turn }, charge.chargeId, stale);
    expect(outcome).toEqual({ kind: "conflict", reason: "charge_not_pending" });
    expect(await balanceOf(second.apiKey)).toBe(1000);
  });
});

/** A merchant, a funded agent, a $4 checkout link, and the charge a payment of it would create (as payCheckoutLink builds it). */
async function checkoutPayment() {
  const merchant = await createMerchant();
  const agent = await createAgent({ credit: 1000 });
  const link = (
    await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 400, description: "one report" },
    })
  ).body;
  const found = (await checkoutLinkForPayment(env.DB, link.checkoutToken))!;
  const charge = {
    ...newPendingCharge(CONTROL_IDS, merchant.merchantId, {
      amountMinor: 400,
      description: "one report",
      checkoutLinkId: found.link.id,
    }),
    merchantName: found.merchantName,
    merchantCategory: found.merchantCategory,
  };
  return { merchant, agent, link, charge };
}

describe("a payment whose batch creates its charge, committed but answer lost", () => {
  it("a checkout-link payment is answered as paid, once (its second try fails on the charge it created)", async () => {
    const { merchant, agent, charge } = await checkoutPayment();
    const turn = { cache: new AgentStateCache(), endTurn: () => {} };

    const outcome = await payNewCharge(
      { env: lossyEnv(), agentId: agent.agentId, turn },
      { charge, birthGuards: [], view: CHECKOUT_PAID_VIEW },
    );
    expect(outcome).toMatchObject({
      kind: "paid",
      charge: { chargeId: charge.id, status: "paid" },
      merchantBalanceMinor: 400,
    });
    expect(await balanceOf(agent.apiKey)).toBe(600);
    expect(await merchantBalance(merchant.apiKey)).toBe(400);
    const listed = (await api("GET", "/merchant/checkout-links", { token: merchant.apiKey })).body.links;
    expect(listed[0]).toMatchObject({ paymentsCount: 1, totalPaidMinor: 400 });
    expect((await api("GET", "/console/audit/verify", { token: await consoleToken() })).body.ok).toBe(true);
  });
});

describe("a payment batch that reaches D1 after its request gave up", () => {
  it("is refused once the request freed its Idempotency-Key, so the retry with that key pays the link once", async () => {
    const { merchant, agent, link, charge } = await checkoutPayment();
    // The request's reservation, as the Idempotency-Key middleware makes it for this agent's key.
    const key = `late-${crypto.randomUUID()}`;
    const scope = await sha256Hex(`idempotency-scope:Bearer ${agent.apiKey}`);
    const reservedAt = new Date().toISOString();
    await env.DB.prepare(
      "INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at) VALUES (?, ?, 'h', 'in_progress', ?, ?)",
    )
      .bind(scope, key, reservedAt, new Date(Date.now() + IDEMPOTENCY_TTL_MS).toISOString())
      .run();

    // The ledger call fails at once (a dropped connection) while the plan is still on its way.
    let late: CommitPlan | undefined;
    const real = ledgerOf(env, 0);
    const dropped = {
      ...env,
      LEDGER: {
        getByName: () => ({
          commit: async (plan: CommitPlan) => {
            late = plan;
            throw new Error("Network connection lost.");
          },
        }),
      },
    } as unknown as typeof env;
    const turn = { cache: new AgentStateCache(), endTurn: () => {} };
    await expect(
      payNewCharge(
        { env: dropped, agentId: agent.agentId, turn, slot: { scope, key, reservedAt } },
        { charge, birthGuards: [], view: CHECKOUT_PAID_VIEW },
      ),
    ).rejects.toThrow(/connection lost/);
    // The middleware frees the key of a request that failed (5xx) ...
    await releaseReservation(env.DB, { scope, key, reservedAt });
    // ... and only then does the plan reach the ledger: refused, nothing of it written.
    const result: CommitResult = await real.commit(late!);
    expect(result).toEqual({ kind: "refused", reason: "idempotency_key_released" });
    expect(await balanceOf(agent.apiKey)).toBe(1000);
    expect(await env.DB.prepare("SELECT 1 FROM charges WHERE id = ?").bind(charge.id).first()).toBeNull();

    // The client's retry with the same key pays the link, once.
    const retry = await api("POST", `/checkout/${link.checkoutToken}/pay`, {
      token: agent.apiKey,
      headers: { "Idempotency-Key": key },
    });
    expect(retry.status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(600);
    const listed = (await api("GET", "/merchant/checkout-links", { token: merchant.apiKey })).body.links;
    expect(listed.find((l: { checkoutToken: string }) => l.checkoutToken === link.checkoutToken)).toMatchObject({
      paymentsCount: 1,
      totalPaidMinor: 400,
    });
    expect((await api("GET", "/console/audit/verify", { token: await consoleToken() })).body.ok).toBe(true);
  });
});
