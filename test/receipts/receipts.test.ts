import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import { buildApp } from "../../src/app";
import { settingsOf } from "../../src/config/env";
import { createPayout, sendPayout, treasuryOf } from "../../src/payouts/service";
import { verifyJws } from "../../src/proofs/keys";
import { createRefund, sendRefund } from "../../src/refunds/service";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { paidCharge, refund, refundsOf } from "../helpers/money-out";
import { TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";
import { paidBelowACent } from "../helpers/sub-cent";
import { waitFor } from "../helpers/wait";
import { freshPayer, publicClient, xPaymentFor } from "../helpers/x402";
import { fundedMerchant, payoutOf } from "../payouts/fixtures";

/*
 * Signed receipts of paid charges (each payment method), paid payouts and succeeded refunds:
 * each verified offline against the key set the service publishes, and tied to the real audit
 * row that records it. Payouts and x402 go through the local chain, with fresh addresses.
 */
const TYP = "agent-pay-receipt+jwt";
const UNITS_PER_CENT = 10_000n;

const jwks = async () => (await api("GET", "/.well-known/jwks.json")).body;

/** The receipt at `path`, verified against the published keys; its header and payload. */
async function verifiedReceipt(path: string, token?: string) {
  const res = await api("GET", path, token ? { token } : {});
  expect(res.status, res.text).toBe(200);
  expect(Object.keys(res.body)).toEqual(["receipt"]);
  const receipt = res.body.receipt as string;
  const verdict = await verifyJws(receipt, await jwks(), TYP);
  if (!verdict.ok) throw new Error(`receipt does not verify: ${verdict.reason}`);
  const header = JSON.parse(atob(receipt.split(".")[0]!.replace(/-/g, "+").replace(/_/g, "/")));
  return { receipt, header, payload: verdict.payload as Record<string, any> };
}

/** The audit row at `seq`, as the console reads it. */
async function auditRow(seq: number) {
  const res = await api("GET", `/console/audit?afterSeq=${seq - 1}&limit=1`, { token: await consoleToken() });
  expect(res.status).toBe(200);
  const [row] = res.body.events;
  expect(row.seq).toBe(seq);
  return row;
}

/** The payload names the audit row of `type` that records the object, with its real hash. */
async function expectAuditRow(payload: Record<string, any>, type: string, fields: Record<string, unknown>) {
  const row = await auditRow(payload.auditSeq);
  expect(row).toMatchObject({ type, ...fields });
  expect(payload.auditHash).toBe(row.hash);
  return row;
}

describe("charge receipts", () => {
  it("a wallet payment: signed with the current key, the same on every read, naming its audit row", async () => {
    const { merchant, agent, chargeId } = await paidCharge(1_234, { name: "Receipt Co" });
    const charge = (await api("GET", `/charges/${chargeId}`)).body;
    const first = await verifiedReceipt(`/charges/${chargeId}/receipt`);
    expect(first.header).toEqual({ alg: "EdDSA", kid: "test-only-receipts-1", typ: TYP });
    expect(first.payload).toEqual({
      type: "charge",
      chargeId,
      merchantId: merchant.merchantId,
      amountMinor: 1_234,
      amountBaseUnits: "12340000",
      currency: "USD",
      method: "ledger",
      reference: charge.reference,
      paidAt: charge.paidAt,
      payer: agent.agentId,
      network: null,
      transaction: null,
      auditSeq: expect.any(Number),
      auditHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    await expectAuditRow(first.payload, "charge.paid", {
      chargeId,
      reference: charge.reference,
      agentId: agent.agentId,
      amountMinor: 1_234,
      createdAt: charge.paidAt,
    });
    // EdDSA is deterministic and the payload has no time of reading: the same bytes again.
    const second = await verifiedReceipt(`/charges/${chargeId}/receipt`);
    expect(second.receipt).toBe(first.receipt);
    // A later refund changes the charge, not its receipt.
    expect((await refund(merchant.apiKey, chargeId, { amountUsdCents: 34 })).status).toBe(201);
    expect((await verifiedReceipt(`/charges/${chargeId}/receipt`)).receipt).toBe(first.receipt);
  });

  it("a checkout link payment and a PayLink draw", async () => {
    const merchant = await createMerchant({ name: "Receipt Links" });
    const agent = await createAgent({ credit: 2_000 });
    const link = await api("POST", "/merchant/checkout", {
      token: merchant.apiKey,
      body: { amountUsdCents: 300, description: "one report" },
    });
    expect(link.status, link.text).toBe(201);
    const paid = await api("POST", `/checkout/${link.body.checkoutToken}/pay`, { token: agent.apiKey });
    expect(paid.status).toBe(200);
    const viaLink = await verifiedReceipt(`/charges/${paid.body.charge.chargeId}/receipt`);
    expect(viaLink.payload).toMatchObject({
      type: "charge",
      method: "ledger",
      amountMinor: 300,
      payer: agent.agentId,
      reference: paid.body.charge.reference,
    });
    await expectAuditRow(viaLink.payload, "charge.paid", { chargeId: paid.body.charge.chargeId });

    const paylink = await api("POST", "/merchant/paylinks", {
      token: merchant.apiKey,
      body: { budgetUsdCents: 1_000 },
    });
    expect(paylink.status).toBe(201);
    expect((await api("POST", `/pl/${paylink.body.code}/accept`, { token: agent.apiKey })).status).toBe(200);
    const drawn = await api("POST", `/merchant/paylinks/${paylink.body.code}/charge`, {
      token: merchant.apiKey,
      body: { agentId: agent.agentId, amountUsdCents: 450 },
    });
    expect(drawn.status, drawn.text).toBe(200);
    const viaDraw = await verifiedReceipt(`/charges/${drawn.body.charge.chargeId}/receipt`);
    expect(viaDraw.payload).toMatchObject({
      method: "paylink",
      amountMinor: 450,
      payer: agent.agentId,
      merchantId: merchant.merchantId,
      transaction: null,
    });
    await expectAuditRow(viaDraw.payload, "charge.paid", { chargeId: drawn.body.charge.chargeId, amountMinor: 450 });
  });

  it("an x402 payment on the local chain: the payer's address and the settlement transaction", async () => {
    const merchant = await createMerchant({ name: "Receipt Onchain" });
    const charge = await createCharge(merchant.apiKey, 275);
    const payer = await freshPayer(275n * UNITS_PER_CENT);
    const path = `/charges/${charge.chargeId}/x402`;
    const { header } = await xPaymentFor(path, payer.key, 275n * UNITS_PER_CENT);
    const settledRes = await api("GET", path, { headers: { "X-PAYMENT": header } });
    expect(settledRes.status, settledRes.text).toBe(200);
    const paidCharge = (await api("GET", `/charges/${charge.chargeId}`)).body;

    const { payload } = await verifiedReceipt(`/charges/${charge.chargeId}/receipt`);
    expect(payload).toMatchObject({
      type: "charge",
      chargeId: charge.chargeId,
      method: "x402",
      amountMinor: 275,
      reference: paidCharge.reference,
      transaction: paidCharge.reference,
      network: "base-sepolia",
      paidAt: paidCharge.paidAt,
    });
    expect(payload.payer.toLowerCase()).toBe(payer.address.toLowerCase());
    const row = await expectAuditRow(payload, "charge.paid", { chargeId: charge.chargeId, agentId: null });
    expect(row.data.payer).toBe(payload.payer);
    const mined = await publicClient().getTransactionReceipt({ hash: payload.transaction as Hex });
    expect(mined.status).toBe("success");
    expect(mined.from.toLowerCase()).not.toBe(payer.address.toLowerCase()); // a gas key sent it, for the payer
  });

  it("an x402 payment below a cent: amountBaseUnits exact, amountMinor null, as its audit row states them", async () => {
    const merchant = await createMerchant({ name: "Receipt Sub-cent" });
    // $0.001, $0.012345 (more than a cent, not whole cents) and $0.02 paid in base units (whole cents).
    for (const [units, cents] of [
      [1_000n, null],
      [12_345n, null],
      [20_000n, 2],
    ] as const) {
      const chargeId = await paidBelowACent(merchant.merchantId, units);
      const charge = (await api("GET", `/charges/${chargeId}`)).body;
      expect(charge).toMatchObject({ status: "paid", amountMinor: cents, amountBaseUnits: String(units) });
      const first = await verifiedReceipt(`/charges/${chargeId}/receipt`);
      expect(first.payload).toEqual({
        type: "charge",
        chargeId,
        merchantId: merchant.merchantId,
        amountMinor: cents,
        amountBaseUnits: String(units),
        currency: "USD",
        method: "x402",
        reference: charge.reference,
        paidAt: charge.paidAt,
        payer: expect.stringMatching(/^0x[0-9a-f]{40}$/),
        network: settingsOf(env).x402!.network,
        transaction: charge.reference,
        auditSeq: expect.any(Number),
        auditHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      await expectAuditRow(first.payload, "charge.paid", {
        chargeId,
        amountMinor: cents,
        amountBaseUnits: String(units),
      });
      expect((await verifiedReceipt(`/charges/${chargeId}/receipt`)).receipt).toBe(first.receipt);
    }
  });

  it("404 charge_not_found while unpaid or unknown, never a receipt", async () => {
    const merchant = await createMerchant();
    const pending = await createCharge(merchant.apiKey, 100);
    for (const id of [pending.chargeId, "chg_doesnotexist"]) {
      const res = await api("GET", `/charges/${id}/receipt`);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: "charge_not_found" });
    }
    const agent = await createAgent({ credit: 100 });
    expect((await payCharge(agent.apiKey, pending.chargeId)).status).toBe(200);
    await verifiedReceipt(`/charges/${pending.chargeId}/receipt`);
  });

  it("a tampered receipt, or one signed by a key that is not published, does not verify", async () => {
    const { chargeId } = await paidCharge(500);
    const { receipt, payload } = await verifiedReceipt(`/charges/${chargeId}/receipt`);
    const [h, , s] = receipt.split(".");
    const b64url = (text: string) => btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const inflated = `${h}.${b64url(JSON.stringify({ ...payload, amountMinor: 50_000 }))}.${s}`;
    expect(await verifyJws(inflated, await jwks(), TYP)).toMatchObject({ ok: false });
    // One signature character changed for certain (the one replaced is compared, not its neighbour).
    const at = receipt.length - 2;
    const flipped = `${receipt.slice(0, at)}${receipt[at] === "A" ? "B" : "A"}${receipt.slice(at + 1)}`;
    expect(flipped).not.toBe(receipt);
    expect((await verifyJws(flipped, await jwks(), TYP)).ok).toBe(false);
    // Only the key that signs now: the receipt still verifies; with no keys, nothing does.
    const current = (await jwks()).keys.filter((k: { kid: string }) => k.kid === "test-only-receipts-1");
    expect((await verifyJws(receipt, { keys: current }, TYP)).ok).toBe(true);
    const rotatedOut = (await jwks()).keys.filter((k: { kid: string }) => k.kid !== "test-only-receipts-1");
    expect((await verifyJws(receipt, { keys: rotatedOut }, TYP)).ok).toBe(false);
  });
});

describe("key rotation", () => {
  it("a receipt signed by the earlier key still verifies against the published set; new ones carry the new kid", async () => {
    const { chargeId } = await paidCharge(640);
    const ctx = { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} };
    // The Worker as it was before the rotation: key 0 signed, nothing else was published.
    const before = {
      ...env,
      RECEIPT_SIGNING_KEY: JSON.stringify(TEST_RECEIPT_KEYS[0]),
      RECEIPT_PUBLISHED_KEYS: undefined,
    };
    const res = await buildApp().fetch(
      new Request(`http://service.test/charges/${chargeId}/receipt`),
      before,
      ctx as unknown as ExecutionContext,
    );
    expect(res.status).toBe(200);
    const old = ((await res.json()) as { receipt: string }).receipt;
    const verdict = await verifyJws(old, await jwks(), TYP);
    expect(verdict).toMatchObject({ ok: true, kid: "test-only-receipts-0" });

    const now = await verifiedReceipt(`/charges/${chargeId}/receipt`);
    expect(now.header.kid).toBe("test-only-receipts-1");
    expect(now.receipt).not.toBe(old);
    expect(verdict.ok && verdict.payload).toEqual(now.payload);
  });
});

/** Takes steps with a transfer taken without the route (each step may find it not mined yet) until it is decided. */
const sentUntilDecided = <T extends { status: string }>(step: () => Promise<unknown>, read: () => Promise<T>) =>
  waitFor(
    "the transfer decided",
    async () => {
      await step();
      return read();
    },
    (value) => value.status !== "pending",
  );

describe("payout and refund receipts", () => {
  const x402 = () => treasuryOf(settingsOf(env).x402);

  it("a payout: 404 while pending, then the receipt of the paid payout and its payout.paid row", async () => {
    const m = await fundedMerchant(900);
    // Taken without the route, so nothing sends it before the test has read it pending.
    const taken = await createPayout(env, x402(), m.merchantId, 600, undefined);
    const path = `/merchant/payouts/${taken.payout.payoutId}/receipt`;
    const pending = await api("GET", path, { token: m.apiKey });
    expect(pending.status).toBe(404);
    expect(pending.body).toEqual({ error: "payout_not_found" });

    const paid = await sentUntilDecided(
      () => sendPayout(env, x402(), taken.payout.payoutId),
      () => payoutOf(m.apiKey, taken.payout.payoutId),
    );
    expect(paid.status).toBe("paid");
    const { payload, header } = await verifiedReceipt(path, m.apiKey);
    expect(header.kid).toBe("test-only-receipts-1");
    expect(payload).toEqual({
      type: "payout",
      payoutId: paid.payoutId,
      merchantId: m.merchantId,
      amountMinor: 600,
      currency: "USD",
      destination: m.address.toLowerCase(),
      transaction: paid.transaction,
      paidAt: paid.paidAt,
      auditSeq: expect.any(Number),
      auditHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const row = await expectAuditRow(payload, "payout.paid", {
      reference: paid.payoutId,
      merchantId: m.merchantId,
      createdAt: paid.paidAt,
    });
    expect(row.data.transaction).toBe(paid.transaction);
    const mined = await publicClient().getTransactionReceipt({ hash: paid.transaction as Hex });
    expect(mined.status).toBe("success");

    // Another merchant's payout is not found, like an unknown one; the credential rules of merchant routes.
    const other = await createMerchant({ name: "Nosy Co" });
    for (const p of [path, "/merchant/payouts/po_doesnotexist/receipt"])
      expect((await api("GET", p, { token: other.apiKey })).body).toEqual({ error: "payout_not_found" });
    expect((await api("GET", path)).status).toBe(401);
    expect((await api("GET", path, { token: m.agent.apiKey })).status).toBe(403);
  });

  it("a wallet refund: the receipt at once, with the agent refunded and the charge.refunded row", async () => {
    const { merchant, agent, chargeId } = await paidCharge(800);
    const made = await refund(merchant.apiKey, chargeId, { amountUsdCents: 300 });
    expect(made.status).toBe(201);
    const { refundId, createdAt } = made.body.refund;
    const path = `/merchant/refunds/${refundId}/receipt`;
    const { payload } = await verifiedReceipt(path, merchant.apiKey);
    expect(payload).toEqual({
      type: "refund",
      refundId,
      chargeId,
      merchantId: merchant.merchantId,
      amountMinor: 300,
      amountBaseUnits: "3000000",
      currency: "USD",
      method: "ledger",
      agentId: agent.agentId,
      destination: null,
      transaction: null,
      succeededAt: createdAt,
      auditSeq: expect.any(Number),
      auditHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    await expectAuditRow(payload, "charge.refunded", { reference: refundId, chargeId, amountMinor: 300 });
    // The charge's receipt is another one, naming the payment's row.
    const chargeReceipt = await verifiedReceipt(`/charges/${chargeId}/receipt`);
    expect(chargeReceipt.payload.auditSeq).toBeLessThan(payload.auditSeq);

    const other = await createMerchant({ name: "Nosy Refunds" });
    for (const p of [path, "/merchant/refunds/re_doesnotexist/receipt"])
      expect((await api("GET", p, { token: other.apiKey })).body).toEqual({ error: "refund_not_found" });
    expect((await api("GET", path)).status).toBe(401);
    expect((await api("GET", path, { token: agent.apiKey })).status).toBe(403);
  });

  it("an x402 refund: 404 while pending, then the transfer back to the payer", async () => {
    const merchant = await createMerchant({ name: "Receipt Refunds Onchain" });
    const charge = await createCharge(merchant.apiKey, 420);
    const payer = await freshPayer(420n * UNITS_PER_CENT);
    const x402Path = `/charges/${charge.chargeId}/x402`;
    const { header } = await xPaymentFor(x402Path, payer.key, 420n * UNITS_PER_CENT);
    expect((await api("GET", x402Path, { headers: { "X-PAYMENT": header } })).status).toBe(200);

    const taken = await createRefund(env, x402(), merchant.merchantId, charge.chargeId, 120, undefined);
    const path = `/merchant/refunds/${taken.refund.refundId}/receipt`;
    expect((await api("GET", path, { token: merchant.apiKey })).body).toEqual({ error: "refund_not_found" });
    const done = await sentUntilDecided(
      () => sendRefund(env, x402(), taken.refund.refundId),
      async () => (await refundsOf(merchant.apiKey, charge.chargeId))[0]!,
    );
    expect(done.status).toBe("succeeded");

    const { payload } = await verifiedReceipt(path, merchant.apiKey);
    expect(payload).toMatchObject({
      type: "refund",
      refundId: taken.refund.refundId,
      chargeId: charge.chargeId,
      method: "x402",
      amountMinor: 120,
      agentId: null,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    expect(payload.destination.toLowerCase()).toBe(payer.address.toLowerCase());
    const row = await expectAuditRow(payload, "charge.refunded", { reference: taken.refund.refundId });
    expect(row.data.transaction).toBe(payload.transaction);
    expect(payload.succeededAt).toBe(row.createdAt);
    const mined = await publicClient().getTransactionReceipt({ hash: payload.transaction as Hex });
    expect(mined.status).toBe("success");
  });
});
