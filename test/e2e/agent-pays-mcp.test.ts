import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentPay } from "../../client/src/index";
import { PAID_PATH, paywallV2 } from "../../examples/paywall/app";
import { facilitatorTerms } from "../../examples/paywall/facilitator";
import { type Served, serve } from "../../examples/paywall/serve";
import { type DevServer, startDevServer } from "./dev-server";
import { ERC20 } from "./erc20";
import { type ForeignChain, type ForeignPaywall, foreignPaywallV1, foreignPaywallV2 } from "./foreign-paywalls";

// An agent pays x402 paywalls the way an agent's program does, against `npm run dev`: through the
// typed client's paying fetch (agentPay(...).fetch) and through the MCP tool pay_x402_resource over
// the MCP HTTP transport. The paywalls: the official middlewares settling through the official
// facilitator (test/e2e/foreign-paywalls.ts), the demo paywall (examples/paywall, this service as its
// facilitator, $0.001 a call), and one of this service's own charges (GET /charges/:id/x402). Each
// payment debits the wallet exactly its price in base units. `npm run dev` is local development, so
// the tool may fetch 127.0.0.1; the production rule refusing it is test/mcp/x402-tool.test.ts's.
describe("an agent pays x402 paywalls through agentPay().fetch and the MCP tool", () => {
  let dev: DevServer;
  let chain: ForeignChain;
  let token: string;
  let agent: { agentId: string; apiKey: string };
  let mcp: Client;
  const opened: { close: () => Promise<void> }[] = [];

  /** The service, each connection closed (a pooled one the dev server closed fails at once). */
  const closing = (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    request.headers.set("connection", "close");
    return fetch(request);
  };
  const call = async (method: string, path: string, bearer: string, body?: unknown) => {
    const res = await closing(`${dev.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, text, body: text ? JSON.parse(text) : null };
  };
  const unitsOf = async () => BigInt((await call("GET", "/balance", agent.apiKey)).body.balanceBaseUnits);
  const tokensOf = (address: Hex) =>
    createPublicClient({ transport: http(dev.rpcUrl) }).readContract({
      address: chain.asset,
      abi: ERC20,
      functionName: "balanceOf",
      args: [address],
    });
  const payByTool = async (url: string) => {
    const result = await mcp.callTool({ name: "pay_x402_resource", arguments: { url } });
    expect(result.isError, JSON.stringify(result.structuredContent)).toBe(false);
    return result.structuredContent as {
      status: number;
      body: string;
      payment: { paymentId: string; amountBaseUnits: string; payTo: string } | null;
    };
  };

  beforeAll(async () => {
    dev = await startDevServer();
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
    const merchant = await call("POST", "/merchants", token, { name: "terms only" });
    expect(merchant.status).toBe(201);
    const terms = await facilitatorTerms(dev.url, merchant.body.apiKey);
    chain = { rpcUrl: dev.rpcUrl, asset: terms.asset, extra: terms.extra };
    // The operator's CLI makes the agent: $5 in its wallet, x402 allowed to the local hosts.
    const made = dev.cli("agent", "create", "--name", "x402-buyer", "--credit", "500", "--x402-hosts", "127.0.0.1");
    expect(made.status, made.stderr).toBe(0);
    agent = JSON.parse(made.stdout);
    mcp = new Client({ name: "e2e-agent", version: "1.0.0" });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${dev.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${agent.apiKey}` } },
        fetch: closing,
      }),
    );
  }, 300_000);
  afterAll(async () => {
    await mcp?.close();
    await Promise.all(opened.map((p) => p.close()));
    await dev?.stop();
  });

  for (const version of [2, 1] as const) {
    it(`the official v${version} paywall: paid by agentPay().fetch and by the MCP tool, each exactly its price`, async () => {
      const paywall: ForeignPaywall = await (version === 1 ? foreignPaywallV1 : foreignPaywallV2)(chain, {
        maxTimeoutSeconds: 120,
      });
      opened.push(paywall);
      const client = agentPay({ baseUrl: dev.url, apiKey: agent.apiKey, fetch: closing });

      const before = await unitsOf();
      const res = await client.fetch(`${paywall.url}/cheap`);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(await res.json()).toEqual({ paid: "/cheap", paidWith: `x402 v${version}` });
      const afterFetch = await unitsOf();
      expect(before - afterFetch).toBe(paywall.prices["/cheap"]);

      const answer = await payByTool(`${paywall.url}/dear`);
      expect(answer.status, answer.body).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ paid: "/dear", paidWith: `x402 v${version}` });
      expect(answer.payment).toMatchObject({ amountBaseUnits: "50000", payTo: paywall.payTo });
      expect(afterFetch - (await unitsOf())).toBe(paywall.prices["/dear"]);
      // Settled on chain by the official facilitator: the payTo got both prices, exactly.
      expect(await tokensOf(paywall.payTo)).toBe(paywall.prices["/cheap"] + paywall.prices["/dear"]);
    });
  }

  it("the demo paywall (the service as its facilitator): $0.001 a call, debited to the base unit", async () => {
    const merchant = await call("POST", "/merchants", token, { name: "demo paywall" });
    const key = merchant.body.apiKey as string;
    const served: Served = await serve(paywallV2(await facilitatorTerms(dev.url, key), key).fetch);
    opened.push(served);
    const url = `${served.url}${PAID_PATH}`;
    const client = agentPay({ baseUrl: dev.url, apiKey: agent.apiKey, fetch: closing });
    const merchantUnits = async () => BigInt((await call("GET", "/merchant/me", key)).body.merchant.balanceBaseUnits);

    const before = await unitsOf();
    const res = await client.fetch(url);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toMatchObject({ paidWith: "x402 v2" });
    expect(before - (await unitsOf())).toBe(1000n);

    const answer = await payByTool(url);
    expect(answer.status, answer.body).toBe(200);
    expect(answer.payment).toMatchObject({ amountBaseUnits: "1000" });
    expect(before - (await unitsOf())).toBe(2000n);
    // The merchant was credited both calls through the service's facilitator, exactly.
    expect(await merchantUnits()).toBe(2000n);
  });

  it("one of this service's own charges, through its x402 URL: the charge paid, the wallet debited its amount", async () => {
    const merchant = await call("POST", "/merchants", token, { name: "own charges" });
    const key = merchant.body.apiKey as string;
    const charge = await call("POST", "/merchant/charges", key, { amountUsdCents: 7 });
    expect(charge.status, charge.text).toBe(201);
    const before = await unitsOf();
    const answer = await payByTool(`${dev.url}/charges/${charge.body.chargeId}/x402`);
    expect(answer.status, answer.body).toBe(200);
    expect(answer.payment).toMatchObject({ amountBaseUnits: "70000" });
    expect(before - (await unitsOf())).toBe(70_000n);
    const paid = await call("GET", `/charges/${charge.body.chargeId}`, key);
    expect(paid.body).toMatchObject({ status: "paid", amountBaseUnits: "70000" });

    // Through the typed client's fetch as well: another charge, paid the same way.
    const second = await call("POST", "/merchant/charges", key, { amountUsdCents: 3 });
    const client = agentPay({ baseUrl: dev.url, apiKey: agent.apiKey, fetch: closing });
    const res = await client.fetch(`${dev.url}/charges/${second.body.chargeId}/x402`);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(before - (await unitsOf())).toBe(100_000n);
    expect((await call("GET", `/charges/${second.body.chargeId}`, key)).body.status).toBe("paid");
  });

  it("after all of it: the treasury balanced, the audit chain whole, each payment's audit row exact to the base unit", async () => {
    const payments = (await call("GET", "/agent/x402/payments?limit=100", agent.apiKey)).body.payments as {
      paymentId: string;
      amountBaseUnits: string;
    }[];
    expect(payments.length).toBeGreaterThanOrEqual(8);
    const treasury = await call("GET", "/console/treasury", token);
    expect(treasury.body.status, treasury.text).toBe("balanced");
    const verified = await call("GET", "/console/audit/verify", token);
    expect(verified.body.ok, verified.text).toBe(true);
    const events: { type: string; reference: string | null; amountBaseUnits?: string }[] = [];
    for (let after = 0; ; ) {
      const page = await call("GET", `/console/audit?afterSeq=${after}&limit=1000`, token);
      events.push(...page.body.events);
      if (page.body.nextAfterSeq === null) break;
      after = page.body.nextAfterSeq;
    }
    for (const p of payments) {
      const authorized = events.filter(
        (e) => e.type === "agent.x402_payment.authorized" && e.reference === p.paymentId,
      );
      expect(
        authorized.map((e) => e.amountBaseUnits),
        p.paymentId,
      ).toEqual([p.amountBaseUnits]);
    }
  });
});
