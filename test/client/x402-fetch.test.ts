import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { agentPay, X402PaymentRefused } from "../../client/src/index";
import { api, BASE } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { b64, paywall } from "../helpers/stand-in-paywall";
import { received, receiverUrl } from "../helpers/webhooks";

/*
 * The typed client's paying fetch (client/src/x402-fetch.ts): agentPay(...).fetch pays a 402's
 * x402 terms through POST /agent/x402/payments (the Worker, in-process) and sends the request once
 * more with the header, to the test receiver's stand-in paywalls.
 */

const LOCAL = { allowedX402Hosts: ["127.0.0.1"] };

/** The service as the client reaches it; `lose` drops the answers of the first n payment requests after they ran. */
function service(lose = 0) {
  const keys: string[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const paying = request.method === "POST" && new URL(request.url).pathname === "/agent/x402/payments";
    if (paying) keys.push(request.headers.get("idempotency-key") ?? "");
    const response = await exports.default.fetch(request);
    if (paying && keys.length <= lose) throw new TypeError("connection reset (the answer was lost)");
    return response;
  };
  return { fetch, keys };
}

async function unitsOf(key: string): Promise<bigint> {
  return BigInt((await api("GET", "/balance", { token: key })).body.balanceBaseUnits);
}
const paymentsOf = async (key: string) =>
  (await api("GET", "/agent/x402/payments?limit=100", { token: key })).body.payments as { paymentId: string }[];

describe("agentPay(...).fetch", () => {
  it("pays a version 2 paywall once and sends the same POST body again with PAYMENT-SIGNATURE", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { fetch, keys } = service();
    const seen: string[] = [];
    const client = agentPay({
      baseUrl: BASE,
      apiKey: agent.apiKey,
      fetch,
      x402: { onPayment: (payment) => seen.push(payment.paymentId) },
    });
    const { url, name } = paywall({ amount: "1000" });
    // A body given as a stream: it can be read once, so the request is cloned before the first send.
    const body = new Blob(['{"ask":"the report"}']).stream();
    const res = await client.fetch(url, {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(200);
    const answered = (await res.json()) as { paidWith: string };
    expect(answered).toMatchObject({ method: "POST", body: '{"ask":"the report"}' });
    const requests = await received(name);
    expect(requests.map((r) => r.body)).toEqual(['{"ask":"the report"}', '{"ask":"the report"}']);
    expect(answered.paidWith).toBe(requests[1]!.headers["payment-signature"]);
    expect(keys).toHaveLength(1);
    expect(seen).toEqual((await paymentsOf(agent.apiKey)).map((p) => p.paymentId));
    expect(await unitsOf(agent.apiKey)).toBe(before - 1000n);
  });

  it("pays a version 1 paywall with X-PAYMENT", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const client = agentPay({ baseUrl: BASE, apiKey: agent.apiKey, fetch: service().fetch });
    const { url, name } = paywall({ version: 1, amount: "2500" });
    const res = await client.fetch(url);
    expect(res.status).toBe(200);
    expect((await received(name))[1]!.headers["x-payment"]).toBeTruthy();
    expect(await unitsOf(agent.apiKey)).toBe(before - 2500n);
  });

  it("a 402 again after paying is returned after one payment; a 402 without terms is not paid", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const client = agentPay({ baseUrl: BASE, apiKey: agent.apiKey, fetch: service().fetch });
    const { url, name } = paywall({ forever: true, amount: "700" });
    expect((await client.fetch(url)).status).toBe(402);
    expect(await received(name)).toHaveLength(2);
    const plain = await client.fetch(`${receiverUrl()}/resource/paywall?v=1&terms=${b64({ error: "pay me" })}`);
    expect(plain.status).toBe(402);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
    expect(await unitsOf(agent.apiKey)).toBe(before - 700n);
  });

  it("a payment whose answer was lost is asked again under the same Idempotency-Key: paid once", async () => {
    const agent = await createAgent({ policy: LOCAL, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const { fetch, keys } = service(1);
    const client = agentPay({ baseUrl: BASE, apiKey: agent.apiKey, fetch });
    const { url } = paywall({ amount: "1200" });
    expect((await client.fetch(url)).status).toBe(200);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect(await paymentsOf(agent.apiKey)).toHaveLength(1);
    expect(await unitsOf(agent.apiKey)).toBe(before - 1200n);
    // The next logical request gets a key of its own.
    expect((await client.fetch(paywall({ amount: "1" }).url)).status).toBe(200);
    expect(new Set(keys).size).toBe(2);
  });

  it("a refusal throws X402PaymentRefused with the service's reason, and the resource is not asked again", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["api.example"] }, credit: 100 });
    const client = agentPay({ baseUrl: BASE, apiKey: agent.apiKey, fetch: service().fetch });
    const { url, name } = paywall();
    const refused = await client.fetch(url).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(X402PaymentRefused);
    expect(refused).toMatchObject({ status: 403, error: "x402_host_not_allowed" });
    expect(await received(name)).toHaveLength(1);
    // Above the caller's own cap: refused before anything is debited.
    const local = await createAgent({ policy: LOCAL, credit: 100 });
    const x402 = { maxAmountBaseUnits: "10" };
    const capped = agentPay({ baseUrl: BASE, apiKey: local.apiKey, fetch: service().fetch, x402 });
    await expect(capped.fetch(paywall({ amount: "11" }).url)).rejects.toMatchObject({
      status: 402,
      error: "over_max_amount",
    });
    expect(await paymentsOf(local.apiKey)).toHaveLength(0);
  });

  it("over the approval threshold: X402PaymentRefused 402 pending_approval with the approvalId; nothing paid", async () => {
    const agent = await createAgent({ policy: { ...LOCAL, approvalThresholdUsdCents: 1 }, credit: 100 });
    const client = agentPay({ baseUrl: BASE, apiKey: agent.apiKey, fetch: service().fetch });
    const { url, name } = paywall({ amount: "20000" });
    const held = await client.fetch(url).catch((error: unknown) => error);
    expect(held).toBeInstanceOf(X402PaymentRefused);
    expect(held).toMatchObject({ status: 402, error: "pending_approval", body: { pendingApproval: true } });
    expect((held as X402PaymentRefused).body).toMatchObject({ approvalId: expect.stringMatching(/^apr_/) });
    expect(await paymentsOf(agent.apiKey)).toHaveLength(0);
    expect(await received(name)).toHaveLength(1);
  });
});
