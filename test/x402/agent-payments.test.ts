import { env } from "cloudflare:workers";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import { getAddress, type Hex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { agentX402PaymentPlan, X402_OUT_RECORDED } from "../../src/ledger/x402-out";
import { caip2 } from "../../src/x402/terms";
import { api, consoleToken } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { PAY_TO, v2Entry as paywallEntry, REPORT_URL, v1Entry } from "../helpers/paywall-terms";
import { signerOfAuthorization } from "../helpers/x402";

/*
 * An agent pays someone else's x402 paywall from its wallet (POST /agent/x402/payments): the policy
 * decides, the service signs an EIP-3009 authorization from its settlement address for exactly the
 * chosen entry, and one batch debits the wallet exactly and records the payment. Every refusal
 * debits nothing and records nothing.
 */

const x = () => settingsOf(env).x402!;
const RESOURCE = REPORT_URL;
const ANY_HOST = { allowedX402Hosts: ["*"] };

const v2Entry = (over: Record<string, unknown> = {}) => paywallEntry("12345", over);
const v2Terms = (accepts: unknown[]) => ({ x402Version: 2, resource: { url: RESOURCE }, accepts });
const v1Terms = (over: Record<string, unknown> = {}) => ({ x402Version: 1, accepts: [v1Entry("50000", over)] });

const pay = (key: string, body: unknown, idempotencyKey?: string) =>
  api("POST", "/agent/x402/payments", {
    token: key,
    body,
    ...(idempotencyKey ? { headers: { "idempotency-key": idempotencyKey } } : {}),
  });

/** The agent's exact balance, in base units. */
async function unitsOf(key: string): Promise<bigint> {
  const res = await api("GET", "/balance", { token: key });
  expect(res.status).toBe(200);
  return BigInt(res.body.balanceBaseUnits);
}

/** How many payments the agent has, as it lists them. */
async function countOf(key: string): Promise<number> {
  const res = await api("GET", "/agent/x402/payments?limit=100", { token: key });
  expect(res.status).toBe(200);
  return res.body.payments.length;
}

/** Who signed the header's authorization, read back with the token's domain. */
const signerOf = (payload: { signature: Hex; authorization: Record<string, string> }) =>
  signerOfAuthorization(payload.signature, payload.authorization, {
    name: x().assetName,
    version: x().assetVersion,
    chainId: x().chainId,
    verifyingContract: x().asset,
  });

describe("POST /agent/x402/payments: paid", () => {
  it("a version 2 402: 201, the wallet debited exactly, a header signed by the settlement address", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 100 });
    const before = await unitsOf(agent.apiKey);
    const res = await pay(agent.apiKey, { resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]) });
    expect(res.status, res.text).toBe(201);
    expect(await unitsOf(agent.apiKey)).toBe(before - 12_345n);
    const { payment, header } = res.body;
    expect(payment).toMatchObject({
      agentId: agent.agentId,
      resource: RESOURCE,
      payTo: PAY_TO,
      network: caip2(x().chainId),
      asset: getAddress(x().asset),
      amountBaseUnits: "12345",
      status: "authorized",
      transaction: null,
      settledAt: null,
    });
    expect(payment.paymentId).toMatch(/^xpo_/);
    expect(header.name).toBe("PAYMENT-SIGNATURE");
    const decoded = decodePaymentSignatureHeader(header.value);
    expect(decoded.accepted).toEqual(v2Entry());
    const payload = decoded.payload as { signature: Hex; authorization: Record<string, string> };
    expect(payload.authorization).toMatchObject({ from: x().payTo, to: PAY_TO, value: "12345", validAfter: "0" });
    expect(Number(payload.authorization.validBefore) * 1000).toBe(Date.parse(payment.validBefore));
    expect(await signerOf(payload)).toBe(getAddress(x().payTo));
    // Listed and read back as answered.
    const one = await api("GET", `/agent/x402/payments/${payment.paymentId}`, { token: agent.apiKey });
    expect(one.status).toBe(200);
    expect(one.body.payment).toEqual(payment);
    const listed = await api("GET", `/console/agents/${agent.agentId}/x402/payments`, {
      token: await consoleToken(),
    });
    expect(listed.body.payments).toEqual([payment]);
    // The debit is in the audit chain, and so in the CSV export, exact to the base unit.
    const today = new Date().toISOString().slice(0, 10);
    const csv = await api("GET", `/export/transactions.csv?from=${today}&to=${today}`, { token: await consoleToken() });
    const line = csv.text.split("\r\n").find((l) => l.includes(payment.paymentId));
    expect(line).toContain("agent.x402_payment.authorized");
    expect(line?.endsWith(",12345")).toBe(true);
  });

  it("a version 1 402: X-PAYMENT, the first payable entry, below a cent exact", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["api.example"] }, credit: 1 });
    const terms = v1Terms({ maxAmountRequired: "2500" });
    const res = await pay(agent.apiKey, { resource: RESOURCE, paymentRequired: terms });
    expect(res.status, res.text).toBe(201);
    expect(res.body.header.name).toBe("X-PAYMENT");
    const decoded = JSON.parse(atob(res.body.header.value));
    expect(decoded).toMatchObject({ x402Version: 1, scheme: "exact", network: x().network });
    expect(await signerOf(decoded.payload)).toBe(getAddress(x().payTo));
    expect(await unitsOf(agent.apiKey)).toBe(10_000n - 2_500n);
  });

  it("a payment from an agent's key never shows another agent's", async () => {
    const a = await createAgent({ policy: ANY_HOST, credit: 10 });
    const b = await createAgent({ policy: ANY_HOST, credit: 10 });
    const res = await pay(a.apiKey, { resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]) });
    expect(res.status).toBe(201);
    const other = await api("GET", `/agent/x402/payments/${res.body.payment.paymentId}`, { token: b.apiKey });
    expect(other.status).toBe(404);
    expect(other.body.error).toBe("agent_x402_payment_not_found");
    expect(await countOf(b.apiKey)).toBe(0);
  });
});

describe("POST /agent/x402/payments: refused, nothing debited", () => {
  const cases: {
    name: string;
    policy?: Record<string, unknown>;
    credit?: number;
    body: () => unknown;
    status: number;
    error: string;
  }[] = [
    {
      name: "no allowedX402Hosts (off by default)",
      policy: {},
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]) }),
      status: 403,
      error: "x402_host_not_allowed",
    },
    {
      name: "a host the policy does not name",
      policy: { allowedX402Hosts: ["other.example"] },
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]) }),
      status: 403,
      error: "x402_host_not_allowed",
    },
    {
      name: "the v2 terms name another host than the resource",
      policy: { allowedX402Hosts: ["api.example"] },
      body: () => ({
        resource: RESOURCE,
        paymentRequired: { ...v2Terms([v2Entry()]), resource: { url: "https://elsewhere.example/report" } },
      }),
      status: 403,
      error: "x402_host_not_allowed",
    },
    {
      name: "the v1 entry names another host than the resource",
      policy: { allowedX402Hosts: ["api.example"] },
      body: () => ({ resource: RESOURCE, paymentRequired: v1Terms({ resource: "https://elsewhere.example/r" }) }),
      status: 403,
      error: "x402_host_not_allowed",
    },
    {
      name: "over the per-transaction cap (exact)",
      policy: { ...ANY_HOST, maxPerTransactionUsdCents: 1 },
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ amount: "10001" })]) }),
      status: 402,
      error: "excede_tope_por_transaccion",
    },
    {
      name: "over the daily limit",
      policy: { ...ANY_HOST, dailyLimitUsdCents: 1 },
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ amount: "10001" })]) }),
      status: 402,
      error: "excede_limite_diario",
    },
    {
      name: "over the balance by one base unit",
      policy: ANY_HOST,
      credit: 1,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ amount: "10001" })]) }),
      status: 402,
      error: "saldo_insuficiente",
    },
    {
      name: "over maxAmountBaseUnits",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]), maxAmountBaseUnits: "12344" }),
      status: 402,
      error: "over_max_amount",
    },
    {
      name: "another network only",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ network: "eip155:1" })]) }),
      status: 400,
      error: "unsupported_payment_requirements",
    },
    {
      name: "another asset only",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ asset: PAY_TO })]) }),
      status: 400,
      error: "unsupported_payment_requirements",
    },
    ...["0", "-5", "1.5", "abc", "1e6", "10000000000000001"].map((amount) => ({
      name: `amount ${amount}`,
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ amount })]) }),
      status: 400,
      error: "invalid_payment_requirements",
    })),
    {
      name: "maxTimeoutSeconds of years",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ maxTimeoutSeconds: 94_608_000 })]) }),
      status: 400,
      error: "invalid_payment_requirements",
    },
    ...["ws://evil.example/x", "//evil.example/x", "javascript:alert(1)"].map((resource) => ({
      name: `a v1 entry whose resource is ${resource}`,
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v1Terms({ resource }) }),
      status: 400,
      error: "invalid_payment_requirements",
    })),
    {
      name: "the service's own settlement address as payTo",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ payTo: x().payTo })]) }),
      status: 400,
      error: "invalid_payment_requirements",
    },
    // Tokens paid there are lost (the token) or mix with the gas the service spends (the batch and
    // anchor contracts, absent here, are refused by the same list: test/payouts/batch.test.ts).
    ...(
      [
        ["the token itself", () => x().asset],
        ["a gas key's address", () => privateKeyToAddress(x().facilitatorPrivateKeys[0]!)],
      ] as const
    ).map(([what, payTo]) => ({
      name: `${what} as payTo`,
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ payTo: payTo().toLowerCase() })]) }),
      status: 400,
      error: "invalid_payment_requirements",
    })),
    {
      name: "an unknown field beside the request's own",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]), foo: 1 }),
      status: 400,
      error: "invalid_request",
    },
    {
      name: "a resource URL that is not absolute",
      policy: ANY_HOST,
      body: () => ({ resource: "/report", paymentRequired: v2Terms([v2Entry()]) }),
      status: 400,
      error: "invalid_request",
    },
    {
      name: "a 402 listing a thousand (small) entries",
      policy: ANY_HOST,
      body: () => ({
        resource: RESOURCE,
        paymentRequired: v2Terms([...Array.from({ length: 999 }, () => ({ scheme: "x", network: "y" })), v2Entry()]),
      }),
      status: 400,
      error: "invalid_request",
    },
    {
      name: "a 402 listing a thousand full entries (over the body limit)",
      policy: ANY_HOST,
      body: () => ({ resource: RESOURCE, paymentRequired: v2Terms(Array.from({ length: 1000 }, () => v2Entry())) }),
      status: 413,
      error: "payload_too_large",
    },
  ];

  for (const c of cases) {
    it(`${c.name}: ${c.status} ${c.error}`, async () => {
      const agent = await createAgent({ policy: c.policy, credit: c.credit ?? 100 });
      const before = await unitsOf(agent.apiKey);
      const res = await pay(agent.apiKey, c.body());
      expect(res.status, res.text).toBe(c.status);
      expect(res.body.error).toBe(c.error);
      expect(await unitsOf(agent.apiKey)).toBe(before);
      expect(await countOf(agent.apiKey)).toBe(0);
    });
  }

  it("a frozen agent: 403 agent_frozen", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 100 });
    const frozen = await api("POST", `/console/agents/${agent.agentId}/freeze`, {
      token: await consoleToken(),
      body: {},
    });
    expect(frozen.status).toBe(200);
    const res = await pay(agent.apiKey, { resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]) });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe("agent_frozen");
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n);
    expect(await countOf(agent.apiKey)).toBe(0);
  });

  it("a payTo on the operators' blocklist: 403 payee_flagged", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 100 });
    const payTo = getAddress(`0x${"5a".repeat(20)}`);
    const listed = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: payTo, reason: "test: flagged payee" },
    });
    expect(listed.status).toBe(201);
    const res = await pay(agent.apiKey, { resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ payTo })]) });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe("payee_flagged");
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n);
  });
});

describe("POST /agent/x402/payments: at once", () => {
  it("the same Idempotency-Key ten times at once signs once: every answer the same header", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 100 });
    const body = { resource: RESOURCE, paymentRequired: v2Terms([v2Entry()]) };
    const key = `same-${crypto.randomUUID()}`;
    const answers = await Promise.all(Array.from({ length: 10 }, () => pay(agent.apiKey, body, key)));
    const made = answers.filter((a) => a.status === 201);
    // A repeat that arrives while the first still runs is told so (409); every other is the first's answer.
    for (const a of answers) expect([201, 409], a.text).toContain(a.status);
    expect(made.length).toBeGreaterThanOrEqual(1);
    expect(new Set(made.map((a) => a.text)).size).toBe(1);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 12_345n);
    expect(await countOf(agent.apiKey)).toBe(1);
    // Asked again afterwards: the same header, nothing signed or debited again.
    const again = await pay(agent.apiKey, body, key);
    expect(again.status).toBe(201);
    expect(again.text).toBe(made[0]!.text);
    expect(await countOf(agent.apiKey)).toBe(1);
  });

  it("20 payments at once against a balance that covers 5: exactly 5 signed and debited", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 5 });
    const body = { resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ amount: "10000" })]) };
    const answers = await Promise.all(Array.from({ length: 20 }, () => pay(agent.apiKey, body)));
    const made = answers.filter((a) => a.status === 201);
    expect(made.length).toBe(5);
    for (const a of answers.filter((a) => a.status !== 201)) {
      expect(a.status).toBe(402);
      expect(a.body.error).toBe("saldo_insuficiente");
    }
    expect(await unitsOf(agent.apiKey)).toBe(0n);
    expect(await countOf(agent.apiKey)).toBe(5);
    expect(new Set(made.map((a) => a.body.header.value)).size).toBe(5);
  });

  it("a freeze amid 20 payments: every 201 is before the freeze in audit order, none after; the rest move nothing", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 100 });
    const body = { resource: RESOURCE, paymentRequired: v2Terms([v2Entry({ amount: "10000" })]) };
    // Payments go out every 10 ms; the freeze as soon as the first is answered, while the others are on their way.
    const sentAt: number[] = [];
    const payments = Array.from({ length: 20 }, (_, i) =>
      new Promise((r) => setTimeout(r, i * 10)).then(() => {
        sentAt[i] = Date.now();
        return pay(agent.apiKey, body);
      }),
    );
    const frozen = Promise.race(payments).then(async () => {
      const answer = await api("POST", `/console/agents/${agent.agentId}/freeze`, {
        token: await consoleToken(),
        body: { reason: "racing" },
      });
      return { answer, at: Date.now() };
    });
    const [answers, freezing] = await Promise.all([Promise.all(payments), frozen]);
    expect(freezing.answer.status).toBe(200);
    const made = answers.filter((a) => a.status === 201);
    expect(made.length).toBeGreaterThanOrEqual(1);
    for (const [i, a] of answers.entries()) {
      if (a.status !== 201) expect(a.body.error).toBe("agent_frozen");
      if (sentAt[i]! > freezing.at) expect(a.status).toBe(403);
    }
    const freezeRow = await env.DB.prepare("SELECT seq FROM audit_events WHERE type = 'agent.frozen' AND agent_id = ?")
      .bind(agent.agentId)
      .first<{ seq: number }>();
    const paidRows = await env.DB.prepare(
      "SELECT seq, reference FROM audit_events WHERE type = 'agent.x402_payment.authorized' AND agent_id = ?",
    )
      .bind(agent.agentId)
      .all<{ seq: number; reference: string }>();
    expect(paidRows.results.map((r) => r.reference).sort()).toEqual(made.map((a) => a.body.payment.paymentId).sort());
    for (const row of paidRows.results) expect(row.seq).toBeLessThan(freezeRow!.seq);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 10_000n * BigInt(made.length));
    expect(await countOf(agent.apiKey)).toBe(made.length);
  });
});

describe("the outbound payment's plan", () => {
  it("committed twice (a lost answer): debited and recorded once, the second refused as already recorded", async () => {
    const agent = await createAgent({ policy: ANY_HOST, credit: 10 });
    const payment = {
      id: `xpo_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`,
      agentId: agent.agentId,
      resource: RESOURCE,
      payTo: PAY_TO,
      network: x().network,
      asset: x().asset,
      amountBaseUnits: 4_321n,
      nonce: `0x${"cd".repeat(32)}`,
      validBefore: Math.floor(Date.now() / 1000) + 60,
      header: { name: "X-PAYMENT", value: "e30=" },
      recordedBlock: null,
      createdAt: new Date().toISOString(),
    };
    const plan = agentX402PaymentPlan(payment, []);
    const ledger = ledgerOf(env, 0);
    expect((await ledger.commit(plan)).kind).toBe("committed");
    expect(await ledger.commit(plan)).toEqual({ kind: "refused", reason: X402_OUT_RECORDED });
    expect(await unitsOf(agent.apiKey)).toBe(100_000n - 4_321n);
    expect(await countOf(agent.apiKey)).toBe(1);
    const audit = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE reference = ?")
      .bind(payment.id)
      .first<{ n: number }>();
    expect(audit?.n).toBe(1);
  });
});
