import { decodePaymentRequiredHeader } from "@x402/core/http";
import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { facilitatorTerms } from "../../examples/paywall/facilitator";
import { callService, type DevServer, startDevServer } from "./dev-server";
import { ERC20 } from "./erc20";
import { type ForeignChain, type ForeignPaywall, foreignPaywallV1, foreignPaywallV2 } from "./foreign-paywalls";

// An agent pays paywalls this project did not write (the official x402 middlewares, settling through
// the official facilitator on the local chain) through POST /agent/x402/payments: the header the
// service answers is accepted as it is, and the paywall's payTo receives exactly the price, from the
// service's settlement address, while the agent's wallet is debited exactly that.
describe("an agent pays the official x402 paywalls from its wallet", () => {
  let dev: DevServer;
  let chain: ForeignChain;
  let token: string;
  const opened: ForeignPaywall[] = [];

  const call = (method: string, path: string, bearer: string, body?: unknown) =>
    callService(dev.url, method, path, bearer, body);

  beforeAll(async () => {
    dev = await startDevServer();
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

  const tokensOf = (address: Hex) =>
    createPublicClient({ transport: http(dev.rpcUrl) }).readContract({
      address: chain.asset,
      abi: ERC20,
      functionName: "balanceOf",
      args: [address],
    });

  for (const version of [1, 2] as const) {
    it(`v${version}: 201 with a header the paywall takes; the payTo receives exactly the price`, async () => {
      const paywall = await (version === 1 ? foreignPaywallV1 : foreignPaywallV2)(chain, { maxTimeoutSeconds: 120 });
      opened.push(paywall);
      const url = `${paywall.url}/dear`;
      // The operator's CLI makes the agent: its policy names the paywall's host, its wallet holds $1.
      const made = dev.cli(
        "agent",
        "create",
        "--name",
        `foreign-v${version}`,
        "--credit",
        "100",
        "--x402-hosts",
        new URL(url).hostname,
      );
      expect(made.status, made.stderr).toBe(0);
      const agent = { body: JSON.parse(made.stdout) as { agentId: string; apiKey: string } };

      const unpaid = await fetch(url);
      expect(unpaid.status).toBe(402);
      // What an agent hands over: the v1 body, or the decoded v2 PAYMENT-REQUIRED.
      const paymentRequired =
        version === 2 ? decodePaymentRequiredHeader(unpaid.headers.get("payment-required")!) : await unpaid.json();
      const before = (await call("GET", "/balance", agent.body.apiKey)).body;
      const paid = await call("POST", "/agent/x402/payments", agent.body.apiKey, { resource: url, paymentRequired });
      expect(paid.status, paid.text).toBe(201);
      const { payment, header } = paid.body;
      expect(payment).toMatchObject({ payTo: paywall.payTo, amountBaseUnits: "50000", status: "authorized" });
      expect(header.name).toBe(version === 1 ? "X-PAYMENT" : "PAYMENT-SIGNATURE");
      const balance = (await call("GET", "/balance", agent.body.apiKey)).body;
      expect(BigInt(before.balanceBaseUnits) - BigInt(balance.balanceBaseUnits)).toBe(50_000n);

      const res = await fetch(url, { headers: { [header.name]: header.value } });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(await res.json()).toEqual({ paid: "/dear", paidWith: `x402 v${version}` });
      expect(await tokensOf(paywall.payTo)).toBe(paywall.prices["/dear"]);
      expect(paywall.prices["/dear"]).toBe(50_000n);
    });
  }
});
