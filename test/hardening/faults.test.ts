import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import { enqueueDeliveries, redriveDueDeliveries } from "../../src/webhooks/dispatch";
import { api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { injectOnce, type FaultMode as Mode } from "../helpers/faults";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";

/**
 * Fault injection (issue 7): a crash at each step of a payment, a draw, an
 * approval grant and a webhook delivery. After every fault nothing is
 * half-applied, the ledger sums to zero and the audit chain verifies; a retry
 * with the same Idempotency-Key ends in exactly one effect.
 */

afterEach(() => setFaultHook(null));

async function expectConsistentLedger() {
  const sum = await env.DB.prepare("SELECT COALESCE(SUM(amount_minor), 0) AS total FROM ledger_entries").first<{
    total: number;
  }>();
  expect(sum?.total).toBe(0);
  const mismatched = await env.DB.prepare(
    `SELECT a.id FROM agents a WHERE a.balance_minor != COALESCE((SELECT SUM(amount_minor) FROM ledger_entries WHERE account = 'agent:' || a.id), 0)
     UNION ALL SELECT m.id FROM merchants m WHERE m.balance_minor != COALESCE((SELECT SUM(amount_minor) FROM ledger_entries WHERE account = 'merchant:' || m.id), 0)
     UNION ALL SELECT m.id FROM merchants m WHERE m.balance_minor != COALESCE((SELECT SUM(amount_minor) FROM charges WHERE merchant_id = m.id AND status = 'paid'), 0)`,
  ).all();
  expect(mismatched.results).toEqual([]);
  const verify = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(verify.body.ok).toBe(true);
}

const PAYMENT_FAULTS: [FaultPoint, Mode][] = [
  ["payment.before_commit", "throw"],
  ["ledger.before_batch", "throw"],
  ["ledger.before_batch", "abort"],
  ["ledger.after_batch", "throw"],
  ["ledger.after_batch", "abort"],
  ["payment.after_commit", "throw"],
];

/** Faults after the batch committed: the payment and its stored answer are already in D1. */
const COMMITTED = new Set<FaultPoint>(["ledger.after_batch", "payment.after_commit", "draw.after_commit"]);
/**
 * The first answer: a payment whose ledger call failed after its batch landed finds its own
 * reference on the charge and answers paid; any other fault is a 500.
 */
const firstStatus = (point: FaultPoint) => (point === "ledger.after_batch" ? 200 : 500);

describe("faults in a wallet payment", () => {
  for (const [point, mode] of PAYMENT_FAULTS) {
    it(`${mode} at ${point}: nothing half-applied; the retry with the same key pays exactly once`, async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 1000 });
      const charge = await createCharge(merchant.apiKey, 250);
      const fired = injectOnce(point, mode);
      const headers = { "Idempotency-Key": `fault-${point}-${mode}` };
      const first = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
      expect(fired()).toBe(true);
      expect(first.status).toBe(firstStatus(point));
      if (first.status === 200)
        expect(first.body).toMatchObject({
          paid: true,
          charge: { chargeId: charge.chargeId, status: "paid" },
          merchantBalanceMinor: 250,
        });
      await expectConsistentLedger();
      const retry = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey, headers });
      // Before the commit the retry pays; after it, the answer stored in the payment's own batch is replayed.
      expect(retry.status).toBe(200);
      expect(retry.headers.get("idempotent-replayed")).toBe(COMMITTED.has(point) ? "true" : null);
      expect(retry.body).toMatchObject({
        paid: true,
        charge: { chargeId: charge.chargeId, status: "paid" },
        merchantBalanceMinor: 250,
      });
      expect(await balanceOf(agent.apiKey)).toBe(750);
      expect(await merchantBalance(merchant.apiKey)).toBe(250);
      const entries = await env.DB.prepare("SELECT COUNT(*) AS n FROM ledger_entries WHERE account = ?")
        .bind(`agent:${agent.agentId}`)
        .first<{ n: number }>();
      expect(entries?.n).toBe(2); // the credit and exactly one payment
      await expectConsistentLedger();
    });
  }
});

describe("faults in an approval grant", () => {
  for (const [point, mode] of [
    ["payment.before_commit", "throw"],
    ["ledger.after_batch", "abort"],
  ] as [FaultPoint, Mode][]) {
    it(`${mode} at ${point}: the approval is granted and the charge paid exactly once`, async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 1000, policy: { approvalThresholdUsdCents: 100 } });
      const charge = await createCharge(merchant.apiKey, 400);
      const hold = await api("POST", `/charges/${charge.chargeId}/pay`, { token: agent.apiKey });
      expect(hold.status).toBe(402);
      const token = await consoleToken();
      injectOnce(point, mode);
      const headers = { "Idempotency-Key": `grant-${point}-${mode}` };
      const first = await api("POST", `/approvals/${hold.body.approvalId}/grant`, { token, headers });
      expect(first.status).toBe(firstStatus(point));
      await expectConsistentLedger();
      const retry = await api("POST", `/approvals/${hold.body.approvalId}/grant`, { token, headers });
      expect(retry.status).toBe(200);
      expect(retry.headers.get("idempotent-replayed")).toBe(COMMITTED.has(point) ? "true" : null);
      expect(retry.body).toMatchObject({
        approval: { approvalId: hold.body.approvalId, status: "granted" },
        charge: { chargeId: charge.chargeId, status: "paid" },
      });
      expect(await balanceOf(agent.apiKey)).toBe(600);
      const approval = await env.DB.prepare("SELECT status FROM approvals WHERE id = ?")
        .bind(hold.body.approvalId)
        .first<{ status: string }>();
      expect(approval?.status).toBe("granted");
      await expectConsistentLedger();
    });
  }
});

describe("faults in a PayLink draw", () => {
  for (const [point, mode] of [
    ["draw.before_wallet", "throw"],
    ["ledger.before_batch", "abort"],
    ["ledger.after_batch", "throw"],
    ["draw.after_commit", "throw"],
  ] as [FaultPoint, Mode][]) {
    it(`${mode} at ${point}: the grant is drawn exactly once`, async () => {
      const merchant = await createMerchant();
      const agent = await createAgent({ credit: 1000 });
      const paylink = await api("POST", "/merchant/paylinks", {
        token: merchant.apiKey,
        body: { budgetUsdCents: 500 },
      });
      await api("POST", `/pl/${paylink.body.code}/accept`, { token: agent.apiKey });
      injectOnce(point, mode);
      const headers = { "Idempotency-Key": `draw-${point}-${mode}` };
      const body = { agentId: agent.agentId, amountUsdCents: 200 };
      const first = await api("POST", `/merchant/paylinks/${paylink.body.code}/charge`, {
        token: merchant.apiKey,
        body,
        headers,
      });
      expect(first.status).toBe(firstStatus(point));
      if (first.status === 200)
        expect(first.body).toMatchObject({ paid: true, spentMinor: 200, remainingMinor: 300, exhausted: false });
      await expectConsistentLedger();
      const retry = await api("POST", `/merchant/paylinks/${paylink.body.code}/charge`, {
        token: merchant.apiKey,
        body,
        headers,
      });
      // The draw that landed before the crash is answered from its own batch, never drawn twice.
      expect(retry.status).toBe(200);
      expect(retry.headers.get("idempotent-replayed")).toBe(COMMITTED.has(point) ? "true" : null);
      expect(retry.body).toMatchObject({ paid: true, spentMinor: 200, remainingMinor: 300, exhausted: false });
      const grant = await env.DB.prepare("SELECT spent_minor AS spent, uses FROM paylink_grants WHERE agent_id = ?")
        .bind(agent.agentId)
        .first<{ spent: number; uses: number }>();
      const paid = await env.DB.prepare(
        "SELECT COALESCE(SUM(amount_minor), 0) AS total FROM charges WHERE agent_id = ? AND status = 'paid'",
      )
        .bind(agent.agentId)
        .first<{ total: number }>();
      expect(grant?.spent).toBe(paid?.total);
      expect(await balanceOf(agent.apiKey)).toBe(1000 - (paid?.total ?? 0));
      await expectConsistentLedger();
    });
  }
});

describe("a wallet object that crashes under a grant's draw", () => {
  it("the draw is a 500 with nothing applied, and the grant's next draws reach the wallet again", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const paylink = await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 500 } });
    await api("POST", `/pl/${paylink.body.code}/accept`, { token: agent.apiKey });
    const draw = (key: string) =>
      api("POST", `/merchant/paylinks/${paylink.body.code}/charge`, {
        token: merchant.apiKey,
        body: { agentId: agent.agentId, amountUsdCents: 100 },
        headers: { "Idempotency-Key": key },
      });
    expect((await draw("wallet-crash-1")).status).toBe(200);
    const fired = injectOnce("payment.before_commit", "abort");
    expect((await draw("wallet-crash-2")).status).toBe(500);
    expect(fired()).toBe(true);
    await expectConsistentLedger();
    // The grant object's connection to the wallet object broke with it; later draws use a new one.
    for (const key of ["wallet-crash-2", "wallet-crash-3"]) {
      const next = await draw(key);
      expect(next.status).toBe(200);
      expect(next.body).toMatchObject({ paid: true });
    }
    expect(await balanceOf(agent.apiKey)).toBe(700);
    await expectConsistentLedger();
  });
});

describe("faults in a webhook delivery", () => {
  it("a crash after the receiver answered: delivered again with the same envelope id, then recorded once", async () => {
    const merchant = await createMerchant();
    await registerEndpoint("ok-fault-after-post", { merchantId: merchant.merchantId, events: ["charge.created"] });
    injectOnce("delivery.after_post", "throw");
    await createCharge(merchant.apiKey, 10);
    await waitForReceived("ok-fault-after-post", (list) => list.length >= 1);
    // The attempt's lease keeps the next message off it; the cron's redrive picks it up once the lease is over.
    const deadline = Date.now() + 30_000;
    let received = await waitForReceived("ok-fault-after-post", (list) => list.length >= 1);
    while (received.length < 2 && Date.now() < deadline) {
      await enqueueDeliveries(env, await redriveDueDeliveries(env, Date.now() + 10 * 60_000));
      await new Promise((r) => setTimeout(r, 300));
      received = await waitForReceived("ok-fault-after-post", () => true);
    }
    expect(received.length).toBeGreaterThanOrEqual(2);
    expect(new Set(received.map((d) => JSON.parse(d.body).id)).size).toBe(1);
    const delivery = await env.DB.prepare(
      "SELECT d.status, d.attempts FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.url LIKE '%ok-fault-after-post'",
    ).first<{ status: string; attempts: number }>();
    expect(delivery?.status).toBe("delivered");
  });
});
