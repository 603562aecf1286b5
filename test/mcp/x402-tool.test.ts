import { env } from "cloudflare:workers";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { guardedFetch, MAX_FETCHED_BYTES } from "../../src/lib/guarded-fetch";
import { api, consoleToken } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { PAY_TO, v2Entry } from "../helpers/paywall-terms";
import { b64, paywall } from "../helpers/stand-in-paywall";
import { received, receiverUrl } from "../helpers/webhooks";
import { callTool, connectAgent } from "./client";

/*
 * MCP pay_x402_resource: fetch a URL, pay its x402 paywall through the same path as POST
 * /agent/x402/payments, send the request again once. The resources are the test receiver's
 * stand-ins (test/setup/receiver.global.ts) on 127.0.0.1, which the test environment may reach as
 * local development does; the production rule is checked on the same guard with production settings.
 */

const x = () => settingsOf(env).x402!;
const LOCAL = { allowedX402Hosts: ["127.0.0.1"] };

async function unitsOf(key: string): Promise<bigint> {
  const res = await api("GET", "/balance", { token: key });
  return BigInt(res.body.balanceBaseUnits);
}

async function paymentsOf(key: string) {
  return (await api("GET", "/agent/x402/payments?limit=100", { token: key })).body.payments as {
    paymentId: string;
  }[];
}

describe("pay_x402_resource: paying", () => {
  it("a version 2 paywall: pays once through the wallet, sends again with PAYMENT-SIGNATURE, answers the resource", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { url, name } = paywall({ amount: "1000" });
    const client = await connectAgent(agent.apiKey);
    const result = await callTool(client, "pay_x402_resource", { url });
    expect(result.isError, result.text).toBe(false);
    expect(result.body).toMatchObject({ status: 200, contentType: "application/json", truncated: false });
    expect(result.body.payment).toMatchObject({ amountBaseUnits: "1000", payTo: PAY_TO, status: "authorized" });
    // The wallet is debited exactly the price, once; the payment is the agent's, listed as POST's are.
    expect(await unitsOf(agent.apiKey)).toBe(before - 1000n);
    expect((await paymentsOf(agent.apiKey)).map((p) => p.paymentId)).toEqual([result.body.payment.paymentId]);
    // Two requests reached the paywall: the unpaid one and the paid one, whose header is the payment.
    const requests = await received(name);
    expect(requests).toHaveLength(2);
    expect(requests[0]!.headers["payment-signature"]).toBeUndefined();
    const sent = decodePaymentSignatureHeader(requests[1]!.headers["payment-signature"]!);
    expect(sent.accepted).toEqual(v2Entry("1000"));
    expect(sent.payload).toMatchObject({ authorization: { from: x().payTo, to: PAY_TO, value: "1000" } });
    const answered = JSON.parse(result.body.body);
    expect(answered.paidWith).toBe(requests[1]!.headers["payment-signature"]);
    expect(result.text).toContain("paid 0.001 USD");
    await client.close();
  });

  it("a version 1 paywall with a POST: the same method, headers and body again, with X-PAYMENT", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { url, name } = paywall({ version: 1, amount: "2500" });
    const client = await connectAgent(agent.apiKey);
    const result = await callTool(client, "pay_x402_resource", {
      url,
      method: "POST",
      headers: { "content-type": "application/json", "x-agent-note": "hello" },
      body: '{"question":42}',
    });
    expect(result.isError, result.text).toBe(false);
    expect(result.body.status).toBe(200);
    expect(await unitsOf(agent.apiKey)).toBe(before - 2500n);
    const requests = await received(name);
    expect(requests.map((r) => [r.body, r.headers["x-agent-note"], r.headers["content-type"]])).toEqual([
      ['{"question":42}', "hello", "application/json"],
      ['{"question":42}', "hello", "application/json"],
    ]);
    expect(requests[1]!.headers["x-payment"]).toBeTruthy();
    expect(JSON.parse(result.body.body)).toMatchObject({ method: "POST", body: '{"question":42}' });
    await client.close();
  });

  it("no paywall: the answer as it is, payment null, nothing debited (a 402 without x402 terms too)", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const client = await connectAgent(agent.apiKey);
    const missing = await callTool(client, "pay_x402_resource", { url: `${receiverUrl()}/resource/nothing` });
    expect(missing.body).toMatchObject({ status: 404, payment: null });
    const noTerms = await callTool(client, "pay_x402_resource", {
      url: `${receiverUrl()}/resource/paywall?v=1&terms=${b64({ x402Version: 1, accepts: [] })}`,
    });
    expect(noTerms.isError, noTerms.text).toBe(false);
    expect(noTerms.body).toMatchObject({ status: 402, payment: null });
    expect(await unitsOf(agent.apiKey)).toBe(before);
    await client.close();
  });

  it("a 402 again after paying is returned after one payment: no loop", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { url, name } = paywall({ forever: true, amount: "700" });
    const client = await connectAgent(agent.apiKey);
    const result = await callTool(client, "pay_x402_resource", { url });
    expect(result.isError, result.text).toBe(false);
    expect(result.body.status).toBe(402);
    expect(result.body.payment).toMatchObject({ amountBaseUnits: "700" });
    expect(await received(name)).toHaveLength(2);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
    expect(await unitsOf(agent.apiKey)).toBe(before - 700n);
    await client.close();
  });

  it("the same idempotencyKey answers the same payment, debited once; other arguments under it are refused", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { url, name } = paywall({ forever: true, amount: "900" });
    const client = await connectAgent(agent.apiKey);
    const idempotencyKey = `buy-${crypto.randomUUID()}`;
    const first = await callTool(client, "pay_x402_resource", { url, idempotencyKey });
    const again = await callTool(client, "pay_x402_resource", { url, idempotencyKey });
    expect(first.isError, first.text).toBe(false);
    expect(again.body.payment).toEqual(first.body.payment);
    const requests = await received(name);
    expect(requests).toHaveLength(4);
    // The very same signed header went out both times.
    expect(requests[3]!.headers["payment-signature"]).toBe(requests[1]!.headers["payment-signature"]);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
    expect(await unitsOf(agent.apiKey)).toBe(before - 900n);
    const other = await callTool(client, "pay_x402_resource", { url, method: "DELETE", idempotencyKey });
    expect(other.body).toMatchObject({ status: 409, error: "idempotency_key_reused" });
    await client.close();
  });

  it("over the approval threshold: held (not an error), nothing paid or sent again; after a grant the same call pays once", async () => {
    const agent = await createAgent({ policy: { ...LOCAL, approvalThresholdUsdCents: 1 }, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { url, name } = paywall({ amount: "20000" });
    const client = await connectAgent(agent.apiKey);
    const held = await callTool(client, "pay_x402_resource", { url, idempotencyKey: "held-first-call" });
    expect(held.isError, held.text).toBe(false);
    expect(held.body).toMatchObject({ pendingApproval: true, status: 402, payment: null });
    expect(held.body.approvalId).toMatch(/^apr_/);
    expect(held.text).toContain("held for human approval");
    expect(await unitsOf(agent.apiKey)).toBe(before);
    expect(await received(name)).toHaveLength(1);
    const granted = await api("POST", `/approvals/${held.body.approvalId}/grant`, { token: await consoleToken() });
    expect(granted.status, granted.text).toBe(200);
    const paid = await callTool(client, "pay_x402_resource", { url, idempotencyKey: "held-second-call" });
    expect(paid.isError, paid.text).toBe(false);
    expect(paid.body).toMatchObject({ status: 200, payment: { amountBaseUnits: "20000", status: "authorized" } });
    expect(await unitsOf(agent.apiKey)).toBe(before - 20000n);
    expect(await received(name)).toHaveLength(3);
    await client.close();
  });

  it("the policy's refusals are tool errors with their reasons, and nothing is debited", async () => {
    const elsewhere = await createAgent({ policy: { allowedX402Hosts: ["api.example"] }, credit: 100 });
    const client = await connectAgent(elsewhere.apiKey);
    const before = await unitsOf(elsewhere.apiKey);
    const host = await callTool(client, "pay_x402_resource", { url: paywall().url });
    expect(host).toMatchObject({ isError: true, body: { status: 403, error: "x402_host_not_allowed" } });
    await client.close();
    const poor = await createAgent({ policy: LOCAL, credit: 1 });
    const poorClient = await connectAgent(poor.apiKey);
    const balance = await callTool(poorClient, "pay_x402_resource", { url: paywall({ amount: "20000" }).url });
    expect(balance).toMatchObject({ isError: true, body: { status: 402, error: "saldo_insuficiente" } });
    expect(await unitsOf(elsewhere.apiKey)).toBe(before);
    expect(await paymentsOf(poor.apiKey)).toHaveLength(0);
    await poorClient.close();
  });

  it("input the tool sets itself, or a body on a GET, is invalid_request", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const client = await connectAgent(agent.apiKey);
    const url = paywall().url;
    for (const args of [
      { url, headers: { "X-Payment": "forged" } },
      { url, headers: { Host: "elsewhere" } },
      { url, body: "x" },
      { url: "ftp://example.com/file" },
      { url, agentId: "agent_other" },
    ]) {
      const result = await callTool(client, "pay_x402_resource", args);
      expect(result.body, JSON.stringify(args)).toMatchObject({ status: 400, error: "invalid_request" });
    }
    await client.close();
  });
});

describe("pay_x402_resource: what it fetches", () => {
  it("refuses private, link-local, metadata and unique-local addresses before sending anything", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 100 });
    const client = await connectAgent(agent.apiKey);
    for (const url of [
      "http://10.0.0.1/paid",
      "https://192.168.1.10/paid",
      "https://172.16.0.1/paid",
      "http://169.254.169.254/latest/meta-data/",
      "https://[fd00::1]/paid",
      "https://[fe80::1]/paid",
      "https://metadata.google.internal/computeMetadata/v1/",
    ]) {
      const result = await callTool(client, "pay_x402_resource", { url });
      expect(result.body, url).toMatchObject({ status: 400, error: "resource_url_forbidden" });
    }
    expect(await paymentsOf(agent.apiKey)).toHaveLength(0);
    await client.close();
  });

  it("a redirect to a forbidden address is refused at that hop; a redirect to an allowed one is followed", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const client = await connectAgent(agent.apiKey);
    const name = `res-${crypto.randomUUID()}`;
    const toMetadata = `${receiverUrl()}/resource/redirect?name=${name}&to=${encodeURIComponent("https://169.254.169.254/latest/meta-data/")}`;
    const refused = await callTool(client, "pay_x402_resource", { url: toMetadata });
    expect(refused.body).toMatchObject({
      status: 400,
      error: "resource_url_forbidden",
      reason: "forbidden_address",
      url: "https://169.254.169.254/latest/meta-data/",
    });
    expect(await received(name)).toHaveLength(1);
    // Followed, with the hop's own rules: the paywall behind a 307 is paid where it answered 402.
    const target = paywall({ amount: "300" });
    const viaRedirect = `${receiverUrl()}/resource/redirect?name=${name}&status=307&to=${encodeURIComponent(target.url)}`;
    const paid = await callTool(client, "pay_x402_resource", { url: viaRedirect });
    expect(paid.body).toMatchObject({ status: 200, payment: { amountBaseUnits: "300" } });
    expect(await received(target.name)).toHaveLength(2);
    // A chain of redirects longer than 3 hops is given up.
    let chain = `${receiverUrl()}/resource/nothing`;
    for (let i = 0; i < 4; i++)
      chain = `${receiverUrl()}/resource/redirect?name=${name}&to=${encodeURIComponent(chain)}`;
    const long = await callTool(client, "pay_x402_resource", { url: chain });
    expect(long.body).toMatchObject({ status: 502, error: "resource_unreachable", reason: "too_many_redirects" });
    await client.close();
  });

  it("a body over 256 KB is cut at 256 KB while streaming, and said to be", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const client = await connectAgent(agent.apiKey);
    const result = await callTool(client, "pay_x402_resource", { url: `${receiverUrl()}/resource/endless` });
    expect(result.isError, result.text.slice(0, 200)).toBe(false);
    expect(result.body).toMatchObject({ status: 200, truncated: true, payment: null });
    expect(result.body.body).toHaveLength(MAX_FETCHED_BYTES);
    await client.close();
  });

  it("the production rule refuses loopback and plain http, which local development allows", async () => {
    const settings = settingsOf(env);
    const production = { ...settings, environment: "production" as const, webhookDnsResolverUrl: null };
    const get = (url: string) => ({ url, method: "GET", headers: new Headers(), body: null });
    const local = `${receiverUrl()}/resource/nothing`;
    expect(await guardedFetch(get(local), production)).toMatchObject({ ok: false, reason: "https_required" });
    for (const url of [
      "https://127.0.0.1/x",
      "https://localhost/x",
      "https://[::1]/x",
      "https://0x7f.1/x",
      "https://169.254.169.254/x",
    ])
      expect((await guardedFetch(get(url), production)).ok, url).toBe(false);
    // The same local URL in the test environment (as in local development) is fetched.
    expect(await guardedFetch(get(local), settings)).toMatchObject({ ok: true, status: 404 });
  });

  it("a resource that does not answer ends in a timeout, not a hung call", async () => {
    const hang = { url: `${receiverUrl()}/resource/hang`, method: "GET", headers: new Headers(), body: null };
    expect(await guardedFetch(hang, settingsOf(env), 300)).toMatchObject({ ok: false, reason: "timeout" });
  });
});
