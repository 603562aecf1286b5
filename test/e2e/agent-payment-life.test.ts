import { decodePaymentRequiredHeader } from "@x402/core/http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { facilitatorTerms } from "../../examples/paywall/facilitator";
import { callService, type DevServer, startDevServer } from "./dev-server";
import { type ForeignChain, type ForeignPaywall, foreignPaywallV1, foreignPaywallV2 } from "./foreign-paywalls";

// What becomes of an agent's payment of a paywall this project did not write (the official x402
// middlewares and facilitator on the local chain), against `npm run dev` and its own cron: a paywall
// that never settles leaves the authorization unused, and the service gives the wallet its money back
// once the window has closed on chain; one that settles after the service was killed and started
// again is found settled, with the transaction that used it, and the wallet debited once.
describe("the life of an agent's payment of the official x402 paywalls", () => {
  let dev: DevServer;
  let chain: ForeignChain;
  let token: string;
  const opened: ForeignPaywall[] = [];

  const call = (method: string, path: string, bearer: string, body?: unknown) =>
    callService(dev.url, method, path, bearer, body);

  beforeAll(async () => {
    // The cron every 2 s: the reconciliation looks again as soon as a payment has rested.
    dev = await startDevServer({ DEV_CRON_SECONDS: "2" });
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    const merchant = await call("POST", "/merchants", token, { name: "terms only" });
    expect(merchant.status).toBe(201);
    const terms = await facilitatorTerms(dev.url, merchant.body.apiKey);
    chain = { rpcUrl: dev.rpcUrl, asset: terms.asset, extra: terms.extra };
  }, 300_000);
  afterAll(async () => {
    await Promise.all(opened.map((p) => p.close()));
    await dev?.stop();
  });

  /** An agent of the CLI whose policy names the paywall's host, holding $1. */
  function agentFor(url: string, name: string) {
    const made = dev.cli("agent", "create", "--name", name, "--credit", "100", "--x402-hosts", new URL(url).hostname);
    expect(made.status, made.stderr).toBe(0);
    return JSON.parse(made.stdout) as { agentId: string; apiKey: string };
  }

  /** The agent pays `url`'s 402 through the service and sends the header to the paywall: 200. */
  async function payAndFetch(url: string, version: 1 | 2, apiKey: string) {
    const unpaid = await fetch(url);
    expect(unpaid.status).toBe(402);
    const paymentRequired =
      version === 2 ? decodePaymentRequiredHeader(unpaid.headers.get("payment-required")!) : await unpaid.json();
    const paid = await call("POST", "/agent/x402/payments", apiKey, { resource: url, paymentRequired });
    expect(paid.status, paid.text).toBe(201);
    const { header, payment } = paid.body;
    const res = await fetch(url, { headers: { [header.name]: header.value } });
    expect(res.status, await res.clone().text()).toBe(200);
    return payment as { paymentId: string; amountBaseUnits: string };
  }

  const unitsOf = async (apiKey: string) => BigInt((await call("GET", "/balance", apiKey)).body.balanceBaseUnits);

  /** Polls the payment until it leaves `authorized` (the dev server's cron decides it). */
  async function decided(apiKey: string, paymentId: string, timeoutMs = 100_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { body } = await call("GET", `/agent/x402/payments/${paymentId}`, apiKey);
      if (body.payment.status !== "authorized") return body.payment;
      if (Date.now() > deadline) throw new Error(`payment ${paymentId} still authorized`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  it("never settles: released after its window, the wallet whole again, the event written once", async () => {
    const paywall = await foreignPaywallV2(chain, { mode: "never-settles", maxTimeoutSeconds: 10 });
    opened.push(paywall);
    const url = `${paywall.url}/dear`;
    const agent = agentFor(url, "never-settled");
    const before = await unitsOf(agent.apiKey);
    const payment = await payAndFetch(url, 2, agent.apiKey);
    expect(await unitsOf(agent.apiKey)).toBe(before - 50_000n);
    expect(paywall.held()).toBe(1);
    const released = await decided(agent.apiKey, payment.paymentId);
    expect(released).toMatchObject({ status: "released", transaction: null });
    expect(await unitsOf(agent.apiKey)).toBe(before);
    const events = dev.d1(
      `SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'agent_payment.released' AND data LIKE '%${payment.paymentId}%'`,
    );
    expect(events.stdout).toMatch(/"n":\s*1\b/);
  });

  it("settles late, after the service was killed and started again: settled with its transaction, debited once", async () => {
    const paywall = await foreignPaywallV1(chain, { mode: "settles-late", maxTimeoutSeconds: 300 });
    opened.push(paywall);
    const url = `${paywall.url}/dear`;
    const agent = agentFor(url, "settled-late");
    const before = await unitsOf(agent.apiKey);
    const payment = await payAndFetch(url, 1, agent.apiKey);
    // The service stops (no cron, nothing in flight) while the paywall settles what it held.
    await dev.kill();
    const [settled] = await paywall.settleHeld();
    expect(settled).toMatchObject({ success: true });
    dev = await dev.restart({ DEV_CRON_SECONDS: "2" });
    const done = await decided(agent.apiKey, payment.paymentId);
    expect(done).toMatchObject({ status: "settled", transaction: settled!.transaction });
    expect(await unitsOf(agent.apiKey)).toBe(before - 50_000n);
    const receipt = await call("GET", `/agent/x402/payments/${payment.paymentId}/receipt`, agent.apiKey);
    expect(receipt.status, receipt.text).toBe(200);
  });
});
