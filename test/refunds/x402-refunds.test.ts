import { env } from "cloudflare:workers";
import { type Hex, parseAbi, parseEventLogs } from "viem";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { refundsJob } from "../../src/jobs/money-out";
import { ApiError } from "../../src/lib/errors";
import { createRefund, sendRefund } from "../../src/refunds/service";
import { api, consoleToken } from "../helpers/api";
import { createCharge, createMerchant, merchantBalance } from "../helpers/factories";
import { refund, refundsOf } from "../helpers/money-out";
import { waitFor } from "../helpers/wait";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";
import { freshPayer, type Payer, publicClient, tokenBalance, xPaymentFor } from "../helpers/x402";

/*
 * Refunds of x402 payments, against the real local chain: the merchant is debited at once and the
 * amount goes back on chain, from the settlement address to the payer (the authorization's
 * `from`). Every payer is fresh, so its token balance is this file's alone.
 */
const UNITS_PER_CENT = 10_000n;
const TRANSFER_EVENT = parseAbi(["event Transfer(address indexed from, address indexed to, uint256 value)"]);
const x402 = () => settingsOf(env).x402!;

/** A merchant and a charge of `cents` paid with x402 by a fresh payer, who is left with no tokens. */
async function paidByX402(cents: number) {
  const merchant = await createMerchant({ name: "Onchain Refunds" });
  const charge = await createCharge(merchant.apiKey, cents);
  const payer = await freshPayer(BigInt(cents) * UNITS_PER_CENT);
  const path = `/charges/${charge.chargeId}/x402`;
  const { header } = await xPaymentFor(path, payer.key, BigInt(cents) * UNITS_PER_CENT);
  const paid = await api("GET", path, { headers: { "X-PAYMENT": header } });
  expect(paid.status, JSON.stringify(paid.body)).toBe(200);
  expect(await tokenBalance(payer.address)).toBe(0n);
  expect(await merchantBalance(merchant.apiKey)).toBe(cents);
  return { merchant, chargeId: charge.chargeId, payer };
}

const decided = (merchantKey: string, chargeId: string, refundId: string) =>
  waitFor(
    `refund ${refundId}`,
    async () => (await refundsOf(merchantKey, chargeId)).find((r) => r.refundId === refundId)!,
    (r) => r.status !== "pending",
  );

/** The transaction moved exactly `value` from the settlement address to the payer. */
async function expectSentBack(transaction: Hex, payer: Payer, value: bigint) {
  const receipt = await publicClient().getTransactionReceipt({ hash: transaction });
  expect(receipt.status).toBe("success");
  const transfers = parseEventLogs({ abi: TRANSFER_EVENT, eventName: "Transfer", logs: receipt.logs });
  expect(transfers).toHaveLength(1);
  expect(transfers[0]!.args.from.toLowerCase()).toBe(x402().payTo.toLowerCase());
  expect(transfers[0]!.args.to.toLowerCase()).toBe(payer.address.toLowerCase());
  expect(transfers[0]!.args.value).toBe(value);
}

describe("refunds of x402 payments", () => {
  it("debits at once, sends the amount back to the payer on chain, and reports charge.refunded", async () => {
    const { merchant, chargeId, payer } = await paidByX402(500);
    const hook = `refund-x402-${crypto.randomUUID().slice(0, 8)}`;
    await registerEndpoint(hook, { merchantId: merchant.merchantId });

    const res = await refund(merchant.apiKey, chargeId, { amountUsdCents: 200 });
    expect(res.status).toBe(201);
    expect(res.body.refund).toMatchObject({
      chargeId,
      amountMinor: 200,
      currency: "USD",
      method: "x402",
      status: "pending",
      transaction: null,
      failureReason: null,
    });
    expect(res.body.charge).toMatchObject({ chargeId, method: "x402", status: "paid", refundedMinor: 200 });
    expect(await merchantBalance(merchant.apiKey)).toBe(300);

    const done = await decided(merchant.apiKey, chargeId, res.body.refund.refundId);
    expect(done.status).toBe("succeeded");
    expect(done.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await tokenBalance(payer.address)).toBe(200n * UNITS_PER_CENT);
    await expectSentBack(done.transaction as Hex, payer, 200n * UNITS_PER_CENT);

    const [delivery] = await waitForReceived(hook, (l) => l.some((d) => JSON.parse(d.body).type === "charge.refunded"));
    expect(JSON.parse(delivery!.body).data).toEqual({
      refundId: done.refundId,
      chargeId,
      merchantId: merchant.merchantId,
      agentId: null,
      amountMinor: 200,
      amountBaseUnits: "2000000",
      refundedMinor: 200,
      refundedBaseUnits: "2000000",
      currency: "USD",
      method: "x402",
      transaction: done.transaction,
    });

    // The rest, without an amount.
    const rest = await refund(merchant.apiKey, chargeId);
    expect(rest.status).toBe(201);
    expect(rest.body.refund.amountMinor).toBe(300);
    expect(rest.body.charge.refundedMinor).toBe(500);
    expect((await decided(merchant.apiKey, chargeId, rest.body.refund.refundId)).status).toBe("succeeded");
    expect(await tokenBalance(payer.address)).toBe(500n * UNITS_PER_CENT);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);
    expect((await refund(merchant.apiKey, chargeId, { amountUsdCents: 1 })).body).toEqual({
      error: "refund_exceeds_remaining",
    });
    expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(500);
    expect((await api("GET", "/console/audit/verify", { token: await consoleToken() })).body.ok).toBe(true);
  });

  it("refuses a payer that fails screening (403) and debits nothing", async () => {
    const { merchant, chargeId, payer } = await paidByX402(150);
    const block = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: payer.address, reason: "test" },
    });
    expect(block.status).toBe(201);
    const res = await refund(merchant.apiKey, chargeId);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "refund_destination_flagged", verdict: "block", reason: "operator_blocklist" });
    expect(await merchantBalance(merchant.apiKey)).toBe(150);
    expect(await refundsOf(merchant.apiKey, chargeId)).toEqual([]);
    expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(0);
  });

  it("without the settlement key an x402 refund is 503 treasury_not_configured, with nothing debited", async () => {
    const { merchant, chargeId } = await paidByX402(120);
    const unkeyed = { ...x402(), settlementPrivateKey: null };
    const error = await createRefund(env, unkeyed, merchant.merchantId, chargeId, 50, undefined).catch((e) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect({ status: error.status, error: error.error }).toEqual({ status: 503, error: "treasury_not_configured" });
    expect(await merchantBalance(merchant.apiKey)).toBe(120);
    expect(await refundsOf(merchant.apiKey, chargeId)).toEqual([]);
  });

  it("a transfer the treasury cannot cover fails unsent: refund failed, the money back with the merchant, refund.failed", async () => {
    const { merchant, chargeId, payer } = await paidByX402(400);
    const hook = `refund-failed-${crypto.randomUUID().slice(0, 8)}`;
    await registerEndpoint(hook, { merchantId: merchant.merchantId });
    // Taken without the route, so nothing sends it before the test makes it uncoverable.
    const taken = await createRefund(env, x402(), merchant.merchantId, chargeId, 250, undefined);
    expect(taken.charge.refundedMinor).toBe(250);
    expect(await merchantBalance(merchant.apiKey)).toBe(150);
    await env.DB.prepare("UPDATE outbound_transfers SET value = ? WHERE purpose = 'refund' AND owner_id = ?")
      .bind((10n ** 30n).toString(), taken.refund.refundId)
      .run();

    expect(await sendRefund(env, x402(), taken.refund.refundId)).toBe("failed");
    const [failed] = await refundsOf(merchant.apiKey, chargeId);
    expect(failed).toMatchObject({
      refundId: taken.refund.refundId,
      status: "failed",
      transaction: null,
      failureReason: "treasury_insufficient_funds",
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(400);
    expect((await api("GET", `/charges/${chargeId}`)).body.refundedMinor).toBe(0);
    expect(await tokenBalance(payer.address)).toBe(0n);
    // Recorded once: another step finds nothing to do and changes nothing.
    expect(await sendRefund(env, x402(), taken.refund.refundId)).toBe("waiting");
    expect(await merchantBalance(merchant.apiKey)).toBe(400);

    const [delivery] = await waitForReceived(hook, (l) => l.some((d) => JSON.parse(d.body).type === "refund.failed"));
    expect(JSON.parse(delivery!.body).data).toEqual({
      refundId: taken.refund.refundId,
      chargeId,
      merchantId: merchant.merchantId,
      agentId: null,
      amountMinor: 250,
      amountBaseUnits: "2500000",
      refundedMinor: 0,
      refundedBaseUnits: "0",
      currency: "USD",
      method: "x402",
      transaction: null,
      failureReason: "treasury_insufficient_funds",
    });
    const entries = await env.DB.prepare(
      "SELECT transfer_id AS transferId, account, amount_minor AS amountMinor FROM ledger_entries WHERE transfer_id IN (?, ?) ORDER BY transfer_id, amount_minor",
    )
      .bind(taken.refund.refundId, `${taken.refund.refundId}:reversal`)
      .all();
    expect(entries.results).toEqual([
      { transferId: taken.refund.refundId, account: `merchant:${merchant.merchantId}`, amountMinor: -250 },
      { transferId: taken.refund.refundId, account: "external:refunds:base-sepolia", amountMinor: 250 },
      { transferId: `${taken.refund.refundId}:reversal`, account: "external:refunds:base-sepolia", amountMinor: -250 },
      { transferId: `${taken.refund.refundId}:reversal`, account: `merchant:${merchant.merchantId}`, amountMinor: 250 },
    ]);
    // The whole amount can be refunded again.
    expect((await refund(merchant.apiKey, chargeId)).body.refund.amountMinor).toBe(400);
  });

  it("the cron sends a refund its request left behind", async () => {
    const { merchant, chargeId, payer } = await paidByX402(180);
    const taken = await createRefund(env, x402(), merchant.merchantId, chargeId, undefined, undefined);
    // As if the request stopped a minute ago, before sending it.
    const aMinuteAgo = new Date(Date.now() - 60_000).toISOString();
    await env.DB.prepare("UPDATE outbound_transfers SET updated_at = ? WHERE purpose = 'refund' AND owner_id = ?")
      .bind(aMinuteAgo, taken.refund.refundId)
      .run();
    await refundsJob(env);
    const [done] = await refundsOf(merchant.apiKey, chargeId);
    expect(done).toMatchObject({ refundId: taken.refund.refundId, status: "succeeded", amountMinor: 180 });
    expect(await tokenBalance(payer.address)).toBe(180n * UNITS_PER_CENT);
    await expectSentBack(done!.transaction as Hex, payer, 180n * UNITS_PER_CENT);
  });
});
