import { env } from "cloudflare:workers";
import { decodePaymentSignatureHeader } from "@x402/core/http";
import { compactVerify, createLocalJWKSet } from "jose";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { agentX402PaymentPlan } from "../../src/ledger/x402-out";
import { dispatchOutbox } from "../../src/webhooks/dispatch";
import { claimCover, settlementCover } from "../../src/x402/outbound/cover";
import { reconcileAgentX402Payments } from "../../src/x402/outbound/life";
import { base64Json } from "../../src/x402/terms";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createMerchant } from "../helpers/factories";
import { PAY_TO, REPORT_URL, v2Request } from "../helpers/paywall-terms";
import { waitFor } from "../helpers/wait";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { publicClient, type SignedAuthorization, submitAuthorization, tokenBalance } from "../helpers/x402";

/*
 * The life of an agent's outbound x402 payment after it is authorized, against the real local chain
 * (a block every 2 s): used on chain, it ends `settled` with the transaction that used it; unused
 * past its window (by the chain's own block time, at a block DEPOSIT_CONFIRMATIONS deep), it ends
 * `released` and the debit is given back, once, however many reconciliations run.
 */

const x = () => settingsOf(env).x402!;
const RESOURCE = REPORT_URL;
const terms = (amount: string, maxTimeoutSeconds: number) => v2Request(amount, { maxTimeoutSeconds }).paymentRequired;

async function unitsOf(key: string): Promise<bigint> {
  const res = await api("GET", "/balance", { token: key });
  expect(res.status).toBe(200);
  return BigInt(res.body.balanceBaseUnits);
}

/** A payment of `amount` base units with a window of `seconds`, from a fresh agent holding $1. */
async function authorized(amount: string, seconds: number) {
  const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 100 });
  const res = await api("POST", "/agent/x402/payments", {
    token: agent.apiKey,
    body: { resource: RESOURCE, paymentRequired: terms(amount, seconds) },
  });
  expect(res.status, res.text).toBe(201);
  const payload = decodePaymentSignatureHeader(res.body.header.value).payload as SignedAuthorization;
  return { agent, payment: res.body.payment, payload };
}

const paymentOf = async (key: string, id: string) =>
  (await api("GET", `/agent/x402/payments/${id}`, { token: key })).body.payment;

/** The reconciliation as a later run makes it: every authorized payment is due. */
const reconcileLater = (minutes = 1) => reconcileAgentX402Payments(env, Date.now() + minutes * 60_000);

/** Waits until the block the reconciliation trusts (DEPOSIT_CONFIRMATIONS below the head) is timed at `seconds` or later. */
async function chainReaches(seconds: number) {
  await waitFor(
    "the trusted block's timestamp",
    async () => {
      const head = await publicClient().getBlockNumber();
      const block = await publicClient().getBlock({ blockNumber: head - BigInt(x().depositConfirmations) });
      return block.timestamp;
    },
    (timestamp) => timestamp >= BigInt(seconds),
  );
}

/** The cover check of `amount` as a payment makes it at `now`, its claim ended after. */
async function coverOf(amount: bigint, now: number) {
  const claim = claimCover(amount);
  try {
    return (await settlementCover(env, x(), claim, now)).kind;
  } finally {
    claim.end();
  }
}

/** Waits until the block `mined` is DEPOSIT_CONFIRMATIONS deep. */
const deepEnough = (mined: bigint) =>
  waitFor(
    "confirmations",
    () => publicClient().getBlockNumber(),
    (head) => head >= mined + BigInt(x().depositConfirmations),
  );

const rowsOf = async (sql: string, ...params: unknown[]) =>
  (
    await env.DB.prepare(sql)
      .bind(...params)
      .all<Record<string, unknown>>()
  ).results;

const eventsOf = (type: string, paymentId: string) =>
  rowsOf(
    "SELECT merchant_id AS merchantId, data FROM outbox_events WHERE type = ? AND data LIKE ?",
    type,
    `%${paymentId}%`,
  );

const auditOf = (type: string, paymentId: string) =>
  rowsOf("SELECT amount_base_units AS units, data FROM audit_events WHERE type = ? AND reference = ?", type, paymentId);

async function csvLinesOf(paymentId: string): Promise<string[]> {
  const today = new Date().toISOString().slice(0, 10);
  const csv = await api("GET", `/export/transactions.csv?from=${today}&to=${today}`, { token: await consoleToken() });
  expect(csv.status).toBe(200);
  return csv.text.split("\r\n").filter((l) => l.includes(paymentId));
}

describe("an agent's outbound x402 payment, never used", () => {
  it("is released after its window, once, under two reconciliations at once: the wallet whole, CSV, event, audit", async () => {
    const { agent, payment } = await authorized("23456", 1);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 23_456n);
    // Inside its window nothing is decided, whatever the service's clock says.
    const validBefore = Date.parse(payment.validBefore) / 1000;
    await reconcileLater();
    expect((await paymentOf(agent.apiKey, payment.paymentId)).status).toBe("authorized");
    await chainReaches(validBefore);
    const [a, b] = await Promise.all([reconcileLater(2), reconcileLater(2)]);
    expect(a!.released + b!.released).toBe(1);
    await reconcileLater(3);
    const released = await paymentOf(agent.apiKey, payment.paymentId);
    expect(released).toMatchObject({ status: "released", transaction: null, settledAt: null });
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n);
    // The wallet object knows it too: the whole balance, the released amount included, can be spent at once.
    const whole = await api("POST", "/agent/x402/payments", {
      token: agent.apiKey,
      body: { resource: RESOURCE, paymentRequired: terms("1000000", 300) },
    });
    expect(whole.status, whole.text).toBe(201);
    expect(await unitsOf(agent.apiKey)).toBe(0n);
    const lines = await csvLinesOf(payment.paymentId);
    expect(lines.filter((l) => l.includes("agent.x402_payment.authorized") && l.endsWith(",23456"))).toHaveLength(1);
    expect(lines.filter((l) => l.includes("agent.x402_payment.released") && l.endsWith(",23456"))).toHaveLength(1);
    const events = await eventsOf("agent_payment.released", payment.paymentId);
    expect(events).toHaveLength(1);
    expect(events[0]!.merchantId).toBeNull();
    expect(JSON.parse(String(events[0]!.data))).toEqual(released);
    expect(await auditOf("agent.x402_payment.released", payment.paymentId)).toHaveLength(1);
    // The reversing entry, once: the outbound account back at zero for this payment.
    const entries = await rowsOf(
      "SELECT account, CAST(amount_base_units AS TEXT) AS units FROM ledger_entries WHERE transfer_id = ?",
      `${payment.paymentId}:release`,
    );
    expect(entries).toEqual(
      expect.arrayContaining([
        { account: `external:x402-out:${payment.network}`, units: "-23456" },
        { account: `agent:${agent.agentId}`, units: "23456" },
      ]),
    );
    expect(entries).toHaveLength(2);
  });

  it("a payment whose answer was lost (never handed to the agent) is given back after its window", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 10 });
    const validBefore = Math.floor(Date.now() / 1000) + 1;
    const nonce = `0x${crypto.getRandomValues(new Uint8Array(32)).reduce((s, b) => s + b.toString(16).padStart(2, "0"), "")}`;
    const authorization = {
      from: x().payTo,
      to: PAY_TO,
      value: "777",
      validAfter: "0",
      validBefore: String(validBefore),
      nonce,
    };
    const id = `xpo_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
    const plan = agentX402PaymentPlan(
      {
        id,
        agentId: agent.agentId,
        resource: RESOURCE,
        payTo: PAY_TO,
        network: x().network,
        asset: x().asset,
        amountBaseUnits: 777n,
        nonce,
        validBefore,
        header: {
          name: "X-PAYMENT",
          value: base64Json({ x402Version: 1, payload: { signature: "0x", authorization } }),
        },
        recordedBlock: null,
        createdAt: new Date().toISOString(),
      },
      [],
    );
    expect((await ledgerOf(env, 0).commit(plan)).kind).toBe("committed");
    expect(await unitsOf(agent.apiKey)).toBe(100_000n - 777n);
    await chainReaches(validBefore);
    await reconcileLater();
    expect((await paymentOf(agent.apiKey, id)).status).toBe("released");
    expect(await unitsOf(agent.apiKey)).toBe(100_000n);
  });
});

describe("an agent's outbound x402 payment's events", () => {
  it("reach the operator's endpoints (no merchantId), and no merchant's", async () => {
    const run = crypto.randomUUID().slice(0, 8);
    const operatorHook = `ok-life-operator-${run}`;
    const operator = await registerEndpoint(operatorHook);
    const merchant = await createMerchant({ name: "Not the payee" });
    const merchantEndpoint = await registerEndpoint(`ok-life-merchant-${run}`, { merchantId: merchant.merchantId });
    const { payment } = await authorized("1000", 1);
    await chainReaches(Date.parse(payment.validBefore) / 1000);
    await reconcileLater();
    await dispatchOutbox(env);
    const list = await waitForReceived(operatorHook, (got) => got.some((d) => d.body.includes(payment.paymentId)));
    const envelope = JSON.parse(list.find((d) => d.body.includes(payment.paymentId))!.body);
    expect(envelope).toMatchObject({
      type: "agent_payment.released",
      data: { paymentId: payment.paymentId, status: "released" },
    });
    const deliveries = async (endpointId: string) =>
      rowsOf(
        `SELECT d.id FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
         WHERE d.endpoint_id = ? AND e.data LIKE ?`,
        endpointId,
        `%${payment.paymentId}%`,
      );
    expect(await deliveries(operator.id)).toHaveLength(1);
    expect(await deliveries(merchantEndpoint.id)).toHaveLength(0);
  });
});

describe("an agent's outbound x402 payment, used on chain", () => {
  it("becomes settled with the transaction that used it, its event and its audit row; debited once", async () => {
    const { agent, payment, payload } = await authorized("34567", 300);
    const receipt = await submitAuthorization(payload);
    expect(receipt.status).toBe("success");
    await deepEnough(receipt.blockNumber);
    await reconcileLater();
    const settled = await paymentOf(agent.apiKey, payment.paymentId);
    expect(settled).toMatchObject({ status: "settled", transaction: receipt.transactionHash });
    expect(Date.parse(settled.settledAt)).toBeGreaterThan(0);
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 34_567n);
    const events = await eventsOf("agent_payment.settled", payment.paymentId);
    expect(events).toHaveLength(1);
    expect(events[0]!.merchantId).toBeNull();
    expect(JSON.parse(String(events[0]!.data))).toEqual(settled);
    const audit = await auditOf("agent.x402_payment.settled", payment.paymentId);
    expect(audit).toHaveLength(1);
    expect(JSON.parse(String(audit[0]!.data)).transaction).toBe(receipt.transactionHash);
    // Later runs change nothing.
    await reconcileLater(2);
    expect(await paymentOf(agent.apiKey, payment.paymentId)).toEqual(settled);
    expect(await auditOf("agent.x402_payment.settled", payment.paymentId)).toHaveLength(1);
  });

  it("used after the service stopped looking, and past its window by the time it looks: settled, never released", async () => {
    const { agent, payment, payload } = await authorized("4567", 8);
    // Nobody reconciles while the paywall uses it (the service down); the job runs after the window.
    const receipt = await submitAuthorization(payload);
    expect(receipt.status).toBe("success");
    await chainReaches(Date.parse(payment.validBefore) / 1000);
    await deepEnough(receipt.blockNumber);
    const [a, b] = await Promise.all([reconcileLater(), reconcileLater()]);
    expect(a!.settled + b!.settled).toBe(1);
    expect(a!.released + b!.released).toBe(0);
    const settled = await paymentOf(agent.apiKey, payment.paymentId);
    expect(settled).toMatchObject({ status: "settled", transaction: receipt.transactionHash });
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n - 4_567n);
    expect(await eventsOf("agent_payment.released", payment.paymentId)).toHaveLength(0);
  });

  it("has a signed receipt once settled, and none before", async () => {
    const { agent, payment, payload } = await authorized("5000", 300);
    const path = `/agent/x402/payments/${payment.paymentId}/receipt`;
    const before = await api("GET", path, { token: agent.apiKey });
    expect(before.status).toBe(404);
    const receipt = await submitAuthorization(payload);
    await deepEnough(receipt.blockNumber);
    await reconcileLater();
    const res = await api("GET", path, { token: agent.apiKey });
    expect(res.status, res.text).toBe(200);
    // Checked with the published keys, as anyone holding them would.
    const jwks = await api("GET", "/.well-known/jwks.json");
    const { payload: signedBytes, protectedHeader } = await compactVerify(
      String(res.body.receipt),
      createLocalJWKSet(jwks.body),
      {
        algorithms: ["EdDSA", "ES256"],
      },
    );
    expect(protectedHeader.typ).toBe("agent-pay-receipt+jwt");
    const claims = JSON.parse(new TextDecoder().decode(signedBytes));
    expect(claims).toMatchObject({
      paymentId: payment.paymentId,
      agentId: agent.agentId,
      amountBaseUnits: "5000",
      transaction: receipt.transactionHash,
      payTo: PAY_TO,
    });
    expect(typeof claims.auditSeq).toBe("number");
    const other = await createAgent();
    expect((await api("GET", path, { token: other.apiKey })).status).toBe(404);
  });
});

describe("the settlement address's cover", () => {
  it("503 treasury_insufficient_funds when it cannot cover the amount: nothing debited, nothing recorded", async () => {
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 100 });
    // Ten times what the settlement address holds: other files' payments landing meanwhile cannot cover it.
    const amount = (await tokenBalance(x().payTo)) * 10n + 1n;
    const res = await api("POST", "/agent/x402/payments", {
      token: agent.apiKey,
      body: { resource: RESOURCE, paymentRequired: terms(amount.toString(), 60) },
    });
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: "treasury_insufficient_funds" });
    expect(await unitsOf(agent.apiKey)).toBe(1_000_000n);
    const listed = await api("GET", "/agent/x402/payments", { token: agent.apiKey });
    expect(listed.body.payments).toEqual([]);
  });

  it("eight at once where four fit: exactly four signed, the rest 503, nothing promised beyond the cover", async () => {
    const treasury = await api("GET", "/console/treasury", { token: await consoleToken() });
    const outstanding = BigInt(treasury.body.outstandingAuthorizations.totalBaseUnits);
    const available = (await tokenBalance(x().payTo)) - outstanding;
    // Four fit with a fifth of the cover to spare (other files' small payments land meanwhile); five do not.
    const amount = available / 5n + 1n;
    const credit = Number(amount / 10_000n) + 1;
    const agents = await Promise.all(
      Array.from({ length: 8 }, () => createAgent({ policy: { allowedX402Hosts: ["*"] }, credit })),
    );
    const answers = await Promise.all(
      agents.map((agent) =>
        api("POST", "/agent/x402/payments", {
          token: agent.apiKey,
          body: { resource: RESOURCE, paymentRequired: terms(amount.toString(), 60) },
        }),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, 201, 503, 503, 503, 503]);
    for (const refused of answers.filter((a) => a.status === 503))
      expect(refused.body).toEqual({ error: "treasury_insufficient_funds" });
  });

  it("a balance read before a settlement was recorded: what left since is subtracted, not promised again", async () => {
    const available = async () => {
      const treasury = await api("GET", "/console/treasury", { token: await consoleToken() });
      return (await tokenBalance(x().payTo)) - BigInt(treasury.body.outstandingAuthorizations.totalBaseUnits);
    };
    // A tenth of the cover: other files' small payments meanwhile are noise beside it, and what is left
    // serves them (the job below records the settlement a minute ahead, counted again for that minute).
    const amount = (await available()) / 10n;
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: Number(amount / 10_000n) + 1 });
    const res = await api("POST", "/agent/x402/payments", {
      token: agent.apiKey,
      body: { resource: RESOURCE, paymentRequired: terms(amount.toString(), 300) },
    });
    expect(res.status, res.text).toBe(201);
    // The isolate's read of the balance, kept for the checks after it: made now, before the money leaves.
    const readAt = Date.now();
    expect(await coverOf(1n, readAt)).toBe("covered");
    const receipt = await submitAuthorization(decodePaymentSignatureHeader(res.body.header.value).payload as never);
    await deepEnough(receipt.blockNumber);
    await reconcileLater();
    expect((await paymentOf(agent.apiKey, res.body.payment.paymentId)).status).toBe("settled");
    // Against that same read (still fresh), the settled amount counts as gone: half of it more is short.
    const left = await available();
    const kept = readAt;
    expect(await coverOf(left - amount / 2n, kept)).toBe("covered");
    expect(await coverOf(left + amount / 2n, kept)).toBe("short");
  });
});
