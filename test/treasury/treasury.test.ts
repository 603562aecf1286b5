import { env } from "cloudflare:workers";
import { createWalletClient, encodeFunctionData, type Hex, http, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { settingsOf, type X402Settings } from "../../src/config/env";
import { createPayout, sendPayout } from "../../src/payouts/service";
import { sweepToSettlement } from "../../src/sweeps/run";
import { dispatchOutbox } from "../../src/webhooks/dispatch";
import { reconcileAgentX402Payments } from "../../src/x402/outbound/life";
import { api, consoleToken } from "../helpers/api";
import { creditDeposits } from "../helpers/deposits";
import { createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { refund, refundsOf } from "../helpers/money-out";
import { v1Request } from "../helpers/paywall-terms";
import { paidBelowACent } from "../helpers/sub-cent";
import { freshSender, sendTokens, TOKEN } from "../helpers/tokens";
import { waitFor } from "../helpers/wait";
import { received, registerEndpoint, waitForReceived } from "../helpers/webhooks";
import {
  chain,
  freshPayer,
  mintTokens,
  publicClient,
  submitAuthorization,
  tokenBalance,
  xPaymentFor,
} from "../helpers/x402";

/*
 * The treasury reconciliation against the real local chain. This file runs in a project of its own
 * (vitest.config.ts, `workers-treasury`) whose Worker has its own settlement address (no mint on
 * it), gas key and receiving key: nothing else moves its tokens, so every figure is exact and a
 * service that only takes and pays reads `balanced` with a difference of 0. The tests run in order
 * and share that treasury; each leaves it balanced.
 */
const UNITS = 10_000n;
let x: X402Settings;

const client = () => publicClient();

async function giveGas(address: Hex) {
  await client().request({ method: "anvil_setBalance" as never, params: [address, toHex(10n ** 20n)] as never });
}

/** GET /console/treasury: a check now, stored. */
async function checkNow() {
  const res = await api("GET", "/console/treasury", { token: await consoleToken() });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** A check that must read balanced with nothing off. */
async function expectBalanced() {
  const t = await checkNow();
  expect(t).toMatchObject({ status: "balanced", differenceBaseUnits: "0" });
  expect(t.holdings.totalBaseUnits).toBe(t.ledger.expectedBaseUnits);
  return t;
}

/** Sends tokens from the settlement address outside the service: anvil lets the test act as it. */
async function sendFromSettlement(to: Hex, value: bigint) {
  await client().request({ method: "anvil_impersonateAccount" as never, params: [x.payTo] as never });
  try {
    const hash = (await client().request({
      method: "eth_sendTransaction" as never,
      params: [
        {
          from: x.payTo,
          to: chain().token,
          data: encodeFunctionData({ abi: TOKEN, functionName: "transfer", args: [to, value] }),
        },
      ] as never,
    })) as Hex;
    const receipt = await client().waitForTransactionReceipt({ hash, pollingInterval: 100 });
    expect(receipt.status).toBe("success");
  } finally {
    await client().request({ method: "anvil_stopImpersonatingAccount" as never, params: [x.payTo] as never });
  }
}

/** A merchant with a charge of `cents` paid by x402 from a fresh payer (the tokens land on the charge's receiving address). */
async function paidByX402(cents: number) {
  const merchant = await createMerchant({ name: "Treasury x402" });
  const charge = await createCharge(merchant.apiKey, cents);
  const payer = await freshPayer(BigInt(cents) * UNITS);
  const path = `/charges/${charge.chargeId}/x402`;
  const { header } = await xPaymentFor(path, payer.key, BigInt(cents) * UNITS);
  const paid = await api("GET", path, { headers: { "X-PAYMENT": header } });
  expect(paid.status, JSON.stringify(paid.body)).toBe(200);
  return { merchant, chargeId: charge.chargeId, payer };
}

/** An x402 payment of `baseUnits` to the settlement address: a real transfer there, credited through the ledger's plan. */
async function paidBelowACentOnChain(merchantId: string, baseUnits: bigint) {
  const payer = await freshSender(baseUnits);
  const { hash } = await sendTokens(payer, x.payTo, baseUnits);
  return paidBelowACent(merchantId, baseUnits, { payer: payer.account.address, transaction: hash });
}

async function setPayoutAddress(merchantKey: string) {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  const res = await api("PUT", "/merchant/payout-address", { token: merchantKey, body: { address } });
  expect(res.status).toBe(200);
  return { key, address };
}

const payoutStatus = (merchantKey: string, payoutId: string) =>
  waitFor(
    `payout ${payoutId}`,
    () => api("GET", `/merchant/payouts/${payoutId}`, { token: merchantKey }).then((r) => r.body.payout),
    (p) => p.status !== "pending",
  );

/**
 * Mints `value` to the settlement address (from account 0 of the local chain, which no key of this
 * project's Worker is): a real transaction the operator could book as float.
 */
const mintToSettlement = (value: bigint): Promise<Hex> => mintTokens(x.payTo, value);

/** Mines blocks on top, so the transactions before them are as deep as DEPOSIT_CONFIRMATIONS (2) asks. */
const deepen = () => client().request({ method: "anvil_mine" as never, params: [toHex(1)] as never });

/** POST /console/treasury/fundings as the console. */
async function book(transaction: string, headers: Record<string, string> = {}) {
  return api("POST", "/console/treasury/fundings", { token: await consoleToken(), body: { transaction }, headers });
}

/** The audit rows of fundings of `transaction`, in control (where the treasury's fundings live). */
const fundingAuditRows = async (transaction: string) =>
  (
    await env.DB.prepare(
      "SELECT amount_minor AS amountMinor, data FROM audit_events WHERE type = 'treasury.funding_booked' AND reference = ?",
    )
      .bind(transaction.toLowerCase())
      .all<{ amountMinor: number; data: string }>()
  ).results;

/** The latest sweep's transaction, from whichever ledger shard holds it. */
async function latestSweepHash(): Promise<Hex> {
  const found: { txHash: Hex; createdAt: string }[] = [];
  for (const db of [env.DB, env.DB_SHARD_1].filter((d) => d !== undefined)) {
    const row = await db
      .prepare(
        "SELECT tx_hash AS txHash, created_at AS createdAt FROM outbound_transfers WHERE purpose = 'sweep' AND status = 'confirmed' ORDER BY created_at DESC LIMIT 1",
      )
      .first<{ txHash: Hex; createdAt: string }>();
    if (row) found.push(row);
  }
  found.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  return found[0]!.txHash;
}

const shortfallEvents = async () =>
  (await env.DB.prepare("SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'treasury.shortfall'").first<number>(
    "n",
  ))!;

beforeAll(async () => {
  x = settingsOf(env).x402!;
  // This project's own keys: gas for the gas key, and for the settlement address the test acts as.
  await giveGas(privateKeyToAddress(x.facilitatorPrivateKeys[0]!));
  await giveGas(x.payTo);
});

describe("the treasury reconciliation", () => {
  it("reads balanced, difference 0, through deposits, x402 payments, wallet payments and refunds, sweeps, payouts and an x402 refund", async () => {
    const start = await expectBalanced();
    expect(start).toEqual({
      asOfBlock: expect.any(Number),
      settlementAddress: x.payTo.toLowerCase(),
      holdings: { settlementBaseUnits: "0", depositAddressesBaseUnits: "0", totalBaseUnits: "0" },
      ledger: {
        onChainInMinor: 0,
        onChainOutMinor: 0,
        floatBaseUnits: "0",
        expectedBaseUnits: "0",
        pendingOutMinor: 0,
        agentBalancesMinor: 0,
        merchantBalancesMinor: 0,
        inTransitMinor: 0,
        onChainInBaseUnits: "0",
        onChainOutBaseUnits: "0",
        pendingOutBaseUnits: "0",
      },
      differenceBaseUnits: "0",
      status: "balanced",
      outstandingAuthorizations: { count: 0, totalBaseUnits: "0" },
    });

    // In: a deposit of $2.50 to an agent's deposit address, and a $7.00 x402 payment to a charge's address.
    const agent = await createAgent({ name: "treasury depositor" });
    const depositAddress = (await env.DB.prepare("SELECT deposit_address AS a FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first<Hex>("a"))!;
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, depositAddress, 250n * UNITS);
    await creditDeposits();
    const onChain = await paidByX402(700);
    // Ledger only: the agent pays a merchant $1.00 from its wallet, which refunds $0.40 of it.
    const shop = await createMerchant({ name: "Treasury wallet shop" });
    const walletCharge = await createCharge(shop.apiKey, 100);
    expect((await payCharge(agent.apiKey, walletCharge.chargeId)).status).toBe(200);
    expect((await refund(shop.apiKey, walletCharge.chargeId, { amountUsdCents: 40 })).status).toBe(201);

    const beforeSweeps = await expectBalanced();
    expect(beforeSweeps.holdings).toEqual({
      settlementBaseUnits: "0",
      depositAddressesBaseUnits: String(950n * UNITS),
      totalBaseUnits: String(950n * UNITS),
    });
    expect(beforeSweeps.ledger).toEqual({
      onChainInMinor: 950,
      onChainOutMinor: 0,
      floatBaseUnits: "0",
      expectedBaseUnits: String(950n * UNITS),
      pendingOutMinor: 0,
      agentBalancesMinor: 250 - 100 + 40,
      merchantBalancesMinor: 700 + 100 - 40,
      inTransitMinor: 0,
      onChainInBaseUnits: String(950n * UNITS),
      onChainOutBaseUnits: "0",
      pendingOutBaseUnits: "0",
    });
    expect(beforeSweeps.asOfBlock).toBeGreaterThanOrEqual(start.asOfBlock);

    const swept = await sweepToSettlement(env, x);
    expect(swept).toMatchObject({ created: 2, confirmed: 2, failed: 0 });
    const afterSweeps = await expectBalanced();
    expect(afterSweeps.holdings).toEqual({
      settlementBaseUnits: String(950n * UNITS),
      depositAddressesBaseUnits: "0",
      totalBaseUnits: String(950n * UNITS),
    });
    // Swept addresses are read no more: the check follows the money in flight.
    const [stored] = (await api("GET", "/console/treasury/checks?limit=1", { token: await consoleToken() })).body
      .checks;
    expect(stored).toMatchObject({ status: "balanced", totalBaseUnits: String(950n * UNITS) });
    const read = await env.DB.prepare("SELECT addresses_read AS n FROM treasury_checks ORDER BY id DESC LIMIT 1").first(
      "n",
    );
    expect(read).toBe(0);

    // Out: a $3.00 payout of the x402 merchant's money and a $2.00 refund on chain to its payer.
    const payoutTo = await setPayoutAddress(onChain.merchant.apiKey);
    const made = await api("POST", "/merchant/payouts", {
      token: onChain.merchant.apiKey,
      body: { amountUsdCents: 300 },
    });
    expect(made.status).toBe(201);
    expect((await payoutStatus(onChain.merchant.apiKey, made.body.payout.payoutId)).status).toBe("paid");
    expect(await tokenBalance(payoutTo.address)).toBe(300n * UNITS);
    const back = await refund(onChain.merchant.apiKey, onChain.chargeId, { amountUsdCents: 200 });
    expect(back.status).toBe(201);
    await waitFor(
      "x402 refund",
      async () => (await refundsOf(onChain.merchant.apiKey, onChain.chargeId))[0]!,
      (r) => r.status !== "pending",
    ).then((r) => expect(r.status).toBe("succeeded"));
    expect(await tokenBalance(onChain.payer.address)).toBe(200n * UNITS);
    expect(await merchantBalance(onChain.merchant.apiKey)).toBe(200);

    const end = await expectBalanced();
    expect(end.holdings.settlementBaseUnits).toBe(String(450n * UNITS));
    expect(end.ledger).toMatchObject({
      onChainInMinor: 950,
      onChainOutMinor: 500,
      expectedBaseUnits: String(450n * UNITS),
      pendingOutMinor: 0,
      onChainInBaseUnits: String(950n * UNITS),
      onChainOutBaseUnits: String(500n * UNITS),
      pendingOutBaseUnits: "0",
    });
  });

  it("does not call a payout whose tokens left before it is recorded paid a shortfall", async () => {
    const { merchant } = await paidByX402(400);
    expect(await sweepToSettlement(env, x)).toMatchObject({ confirmed: 1 });
    await expectBalanced();
    const destination = await setPayoutAddress(merchant.apiKey);
    // Debited and pending, not sent yet; then its tokens leave as its transfer would, before the service records it.
    const { payout } = await createPayout(env, x, merchant.merchantId, 300, undefined);
    expect(payout.status).toBe("pending");
    await sendFromSettlement(destination.address, 300n * UNITS);
    const inFlight = await checkNow();
    expect(inFlight).toMatchObject({ status: "balanced", differenceBaseUnits: String(-300n * UNITS) });
    expect(inFlight.ledger.pendingOutMinor).toBe(300);
    expect(inFlight.ledger.pendingOutBaseUnits).toBe(String(300n * UNITS));

    // The tokens come back, and the service sends the payout itself: balanced again, difference 0.
    await giveGas(destination.address);
    const payee = createWalletClient({
      account: privateKeyToAccount(destination.key),
      transport: http(chain().rpcUrl),
    });
    const hash = await payee.writeContract({
      chain: null,
      address: chain().token,
      abi: TOKEN,
      functionName: "transfer",
      args: [x.payTo, 300n * UNITS],
    });
    expect((await client().waitForTransactionReceipt({ hash, pollingInterval: 100 })).status).toBe("success");
    await sendPayout(env, x, payout.payoutId);
    expect((await payoutStatus(merchant.apiKey, payout.payoutId)).status).toBe("paid");
    await expectBalanced();
  });

  it("finds a shortfall when tokens leave outside the service, announces it once per episode, and banners every console page", async () => {
    const hook = `treasury-${crypto.randomUUID().slice(0, 8)}`;
    await registerEndpoint(hook, { events: ["treasury.shortfall"] });
    const before = await expectBalanced();
    const announced = await shortfallEvents();
    const sink = privateKeyToAccount(generatePrivateKey());
    const page = async () =>
      (await api("GET", "/console/ui/agents", { headers: { cookie: `console_session=${await consoleToken()}` } })).text;
    expect(await page()).not.toContain('id="treasury-shortfall"');

    await sendFromSettlement(sink.address, 123n * UNITS);
    const short = await checkNow();
    expect(short).toMatchObject({
      status: "shortfall",
      differenceBaseUnits: String(-123n * UNITS),
      holdings: { totalBaseUnits: String(BigInt(before.holdings.totalBaseUnits) - 123n * UNITS) },
      ledger: { expectedBaseUnits: before.ledger.expectedBaseUnits },
    });
    const [delivery] = await waitForReceived(hook, (list) => list.length >= 1);
    const event = JSON.parse(delivery!.body);
    expect(event.type).toBe("treasury.shortfall");
    expect(event.data).toEqual({
      asOfBlock: short.asOfBlock,
      differenceBaseUnits: String(-123n * UNITS),
      expectedBaseUnits: before.ledger.expectedBaseUnits,
      totalBaseUnits: short.holdings.totalBaseUnits,
    });
    expect(await shortfallEvents()).toBe(announced + 1);
    const html = await page();
    expect(html).toContain('id="treasury-shortfall"');
    expect(html).toContain("$1.23 less than the ledger expects");

    // Still short, the same episode: stored, not announced again, even with two checks at once.
    const again = await Promise.all([checkNow(), checkNow()]);
    expect(again.map((t) => t.status)).toEqual(["shortfall", "shortfall"]);
    await dispatchOutbox(env);
    await new Promise((r) => setTimeout(r, 500));
    expect(await shortfallEvents()).toBe(announced + 1);
    expect(await received(hook)).toHaveLength(1);

    // The tokens come back: no longer short, and the banner is gone.
    await giveGas(sink.address);
    const returner = createWalletClient({ account: sink, transport: http(chain().rpcUrl) });
    const hash = await returner.writeContract({
      chain: null,
      address: chain().token,
      abi: TOKEN,
      functionName: "transfer",
      args: [x.payTo, 123n * UNITS],
    });
    expect((await client().waitForTransactionReceipt({ hash, pollingInterval: 100 })).status).toBe("success");
    await expectBalanced();
    expect(await page()).not.toContain('id="treasury-shortfall"');

    // Short again: a new episode, a new event.
    await sendFromSettlement(sink.address, 5n);
    const second = await checkNow();
    expect(second).toMatchObject({ status: "shortfall", differenceBaseUnits: "-5" });
    const list = await waitForReceived(hook, (l) => l.length >= 2);
    expect(list).toHaveLength(2);
    expect(JSON.parse(list[1]!.body).data).toEqual({
      asOfBlock: second.asOfBlock,
      differenceBaseUnits: "-5",
      expectedBaseUnits: before.ledger.expectedBaseUnits,
      totalBaseUnits: String(BigInt(before.holdings.totalBaseUnits) - 5n),
    });
    expect(await shortfallEvents()).toBe(announced + 2);
    const back = await returner.writeContract({
      chain: null,
      address: chain().token,
      abi: TOKEN,
      functionName: "transfer",
      args: [x.payTo, 5n],
    });
    await client().waitForTransactionReceipt({ hash: back, pollingInterval: 100 });
    await expectBalanced();
  });

  it("books a mint to the settlement address as the operator's float, once: a surplus reads balanced again", async () => {
    const before = await expectBalanced();
    const minted = 250_000_000n + 1n; // $250.000001: exact to the base unit
    const hash = await mintToSettlement(minted);
    await deepen();
    const surplus = await checkNow();
    expect(surplus).toMatchObject({ status: "surplus", differenceBaseUnits: String(minted) });
    expect(surplus.ledger.floatBaseUnits).toBe("0");

    const booked = await book(hash);
    expect(booked.status, booked.text).toBe(201);
    expect(booked.body).toEqual({
      funding: { transaction: hash.toLowerCase(), amountBaseUnits: String(minted), bookedAt: expect.any(String) },
    });
    const after = await expectBalanced();
    expect(after.ledger).toMatchObject({
      onChainInMinor: before.ledger.onChainInMinor,
      onChainOutMinor: before.ledger.onChainOutMinor,
      floatBaseUnits: String(minted),
      expectedBaseUnits: String(BigInt(before.ledger.expectedBaseUnits) + minted),
    });
    expect(after.holdings.settlementBaseUnits).toBe(String(BigInt(before.holdings.settlementBaseUnits) + minted));
    const stored = await env.DB.prepare(
      "SELECT float_base_units AS f, status FROM treasury_checks ORDER BY id DESC LIMIT 1",
    ).first<{ f: string; status: string }>();
    expect(stored).toEqual({ f: String(minted), status: "balanced" });

    // The booking is an audit row of control's chain: no ledger money moves, the amount is in its data.
    const [row, ...more] = await fundingAuditRows(hash);
    expect(more).toHaveLength(0);
    expect(row!.amountMinor).toBe(0);
    expect(JSON.parse(row!.data)).toEqual({
      by: "ops@example.com",
      transaction: hash.toLowerCase(),
      amountBaseUnits: String(minted),
      network: x.network,
      asset: x.asset.toLowerCase(),
      blockNumber: expect.any(Number),
    });

    // Again (in any case of hex): booked before, and the float is counted once.
    const again = await book(hash.toUpperCase().replace("0X", "0x"));
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: "funding_already_booked" });
    expect((await expectBalanced()).ledger.floatBaseUnits).toBe(String(minted));
  });

  it("books a funding once under eight requests at once: one 201, the rest funding_already_booked", async () => {
    const sender = await freshSender(10_000_000n);
    const sent = 1_234_567n;
    const { hash } = await sendTokens(sender, x.payTo, sent);
    await deepen();
    const floatBefore = BigInt((await checkNow()).ledger.floatBaseUnits);
    const answers = await Promise.all(Array.from({ length: 8 }, () => book(hash)));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
    for (const refused of answers.filter((a) => a.status === 409))
      expect(refused.body).toEqual({ error: "funding_already_booked" });
    expect(answers.find((a) => a.status === 201)!.body.funding.amountBaseUnits).toBe(String(sent));
    expect(await fundingAuditRows(hash)).toHaveLength(1);
    const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM treasury_fundings WHERE tx_hash = ?")
      .bind(hash.toLowerCase())
      .first<number>("n");
    expect(rows).toBe(1);
    expect((await expectBalanced()).ledger.floatBaseUnits).toBe(String(floatBefore + sent));
  });

  it("replays a keyed booking, and refuses what is no funding, already counted, or badly asked", async () => {
    const sender = await freshSender(10_000_000n);
    // An Idempotency-Key replays the first 201 byte for byte; without it, the same transaction is booked already.
    const { hash: keyed } = await sendTokens(sender, x.payTo, 5_000n);
    await deepen();
    const key = `funding-${crypto.randomUUID()}`;
    const first = await book(keyed, { "idempotency-key": key });
    expect(first.status, first.text).toBe(201);
    const replay = await book(keyed, { "idempotency-key": key });
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.text).toBe(first.text);
    expect(await fundingAuditRows(keyed)).toHaveLength(1);
    expect((await book(keyed)).body).toEqual({ error: "funding_already_booked" });

    // No transfer of the token to the settlement address: elsewhere, reverted, or no such transaction.
    const elsewhere = await sendTokens(sender, privateKeyToAccount(generatePrivateKey()).address, 7_000n);
    const reverted = await sender.wallet.writeContract({
      chain: null,
      address: chain().token,
      abi: TOKEN,
      functionName: "transfer",
      args: [x.payTo, 10n ** 18n], // more than the sender holds
      gas: 200_000n,
    });
    expect((await client().waitForTransactionReceipt({ hash: reverted, pollingInterval: 100 })).status).toBe(
      "reverted",
    );
    await deepen();
    for (const transaction of [elsewhere.hash, reverted, toHex(crypto.getRandomValues(new Uint8Array(32)))]) {
      const refused = await book(transaction);
      expect(refused.status, transaction).toBe(400);
      expect(refused.body).toEqual({ error: "no_funding_transfer" });
    }

    // A sweep into the settlement address is the service's own: the ledger counts its tokens already.
    await paidByX402(150);
    expect(await sweepToSettlement(env, x)).toMatchObject({ confirmed: 1 });
    await deepen();
    const sweep = await latestSweepHash();
    const counted = await book(sweep);
    expect(counted.status).toBe(409);
    expect(counted.body).toEqual({ error: "funding_already_counted" });
    await expectBalanced();

    for (const bad of [
      {},
      { transaction: "0x1234" },
      { transaction: `0x${"g".repeat(64)}` },
      { transaction: keyed, more: 1 },
    ]) {
      const res = await api("POST", "/console/treasury/fundings", { token: await consoleToken(), body: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error).toBe("invalid_request");
    }
    const merchant = await createMerchant();
    const path = "/console/treasury/fundings";
    expect((await api("POST", path, { body: { transaction: keyed } })).status).toBe(401);
    const forged = await api("POST", path, { token: "not-a-token", body: { transaction: keyed } });
    expect(forged.status).toBe(401);
    expect(forged.body.error).toBe("console_session_required");
    const other = await api("POST", path, { token: merchant.apiKey, body: { transaction: keyed } });
    expect(other.status).toBe(403);
    expect(other.body.error).toBe("credential_not_allowed");
  });

  it("counts x402 payments below a cent to the base unit: the chain holding exactly them reads balanced", async () => {
    const before = await expectBalanced();
    const merchant = await createMerchant({ name: "Treasury sub-cent" });
    // Three payments of $0.001 and one of $0.0025: $0.0055 in all, not one whole cent.
    const prices = [1_000n, 1_000n, 1_000n, 2_500n];
    for (const price of prices) await paidBelowACentOnChain(merchant.merchantId, price);
    const paid = prices.reduce((a, b) => a + b, 0n);

    const after = await expectBalanced();
    const inBefore = BigInt(before.ledger.onChainInBaseUnits);
    expect(after.ledger).toMatchObject({
      onChainInBaseUnits: String(inBefore + paid),
      // The cents fields are the exact totals rounded down: what was paid here adds no whole cent.
      onChainInMinor: Number((inBefore + paid) / UNITS),
      onChainOutBaseUnits: before.ledger.onChainOutBaseUnits,
      expectedBaseUnits: String(BigInt(before.ledger.expectedBaseUnits) + paid),
      merchantBalancesMinor: before.ledger.merchantBalancesMinor,
    });
    expect(after.holdings.totalBaseUnits).toBe(String(BigInt(before.holdings.totalBaseUnits) + paid));
    // The stored check keeps the exact figures beside the cents.
    const stored = await env.DB.prepare(
      `SELECT on_chain_in_base_units AS inUnits, on_chain_in_minor AS inCents, expected_base_units AS expected, status
       FROM treasury_checks ORDER BY id DESC LIMIT 1`,
    ).first();
    expect(stored).toEqual({
      inUnits: after.ledger.onChainInBaseUnits,
      inCents: after.ledger.onChainInMinor,
      expected: after.ledger.expectedBaseUnits,
      status: "balanced",
    });

    // Seven more of $0.001 make the merchant's and the ledger's total a whole cent more: exact, never rounded per payment.
    for (let i = 0; i < 7; i++) await paidBelowACentOnChain(merchant.merchantId, 1_000n);
    const whole = await expectBalanced();
    expect(BigInt(whole.ledger.onChainInBaseUnits)).toBe(inBefore + paid + 7_000n);
    expect(whole.ledger.merchantBalancesMinor).toBe(before.ledger.merchantBalancesMinor + 1);

    // A token unit less on chain than the ledger expects is a shortfall, found to the base unit.
    const sink = privateKeyToAccount(generatePrivateKey());
    await sendFromSettlement(sink.address, 1n);
    expect(await checkNow()).toMatchObject({ status: "shortfall", differenceBaseUnits: "-1" });
    await giveGas(sink.address);
    const back = await createWalletClient({ account: sink, transport: http(chain().rpcUrl) }).writeContract({
      chain: null,
      address: chain().token,
      abi: TOKEN,
      functionName: "transfer",
      args: [x.payTo, 1n],
    });
    expect((await client().waitForTransactionReceipt({ hash: back, pollingInterval: 100 })).status).toBe("success");
    await expectBalanced();
  });

  it("counts an x402 refund below a cent to the base unit: sent back exactly, the books read balanced", async () => {
    const before = await expectBalanced();
    const merchant = await createMerchant({ name: "Treasury sub-cent refund" });
    const chargeId = await paidBelowACentOnChain(merchant.merchantId, 2_500n);
    const back = await refund(merchant.apiKey, chargeId);
    expect(back.status, back.text).toBe(201);
    expect(back.body.refund).toMatchObject({ amountMinor: null, amountBaseUnits: "2500" });
    const done = await waitFor(
      "x402 refund below a cent",
      async () => (await refundsOf(merchant.apiKey, chargeId))[0]!,
      (r) => r.status !== "pending",
    );
    expect(done.status).toBe("succeeded");
    const after = await expectBalanced();
    expect(after.ledger).toMatchObject({
      onChainInBaseUnits: String(BigInt(before.ledger.onChainInBaseUnits) + 2_500n),
      onChainOutBaseUnits: String(BigInt(before.ledger.onChainOutBaseUnits) + 2_500n),
      expectedBaseUnits: before.ledger.expectedBaseUnits,
    });
  });

  it("counts agents' x402 payments: balanced while authorized, used, settled and released; 503 beyond what it can cover", async () => {
    await expectBalanced();
    // A float of its own, booked, so the cover below does not depend on what earlier tests left.
    const minted = await mintToSettlement(2_000_000n);
    await waitFor(
      "the float booked",
      () => book(minted),
      (res) => res.status === 201,
    );
    await expectBalanced();
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 100 });
    const pay = (amount: bigint, maxTimeoutSeconds = 300) =>
      api("POST", "/agent/x402/payments", {
        token: agent.apiKey,
        body: v1Request(amount.toString(), { maxTimeoutSeconds }),
      });
    const held = await tokenBalance(x.payTo);
    const over = await pay(held + 1n);
    expect(over.status).toBe(503);
    expect(over.body).toEqual({ error: "treasury_insufficient_funds" });
    const first = await pay(300_000n);
    expect(first.status, first.text).toBe(201);
    // What the settlement address holds less the 300,000 it has promised: one unit more is refused, nothing debited.
    const beyond = await pay(held - 300_000n + 1n);
    expect(beyond.status).toBe(503);
    expect(beyond.body).toEqual({ error: "treasury_insufficient_funds" });
    const promised = await expectBalanced();
    expect(promised.outstandingAuthorizations).toEqual({ count: 1, totalBaseUnits: "300000" });
    expect(BigInt(promised.ledger.pendingOutBaseUnits)).toBeGreaterThanOrEqual(300_000n);
    // The paywall uses it on chain: the tokens are gone before the service records it, a pending outflow
    // that has left (as a payout mined and not yet recorded paid): balanced, never a shortfall.
    const used = await submitAuthorization(JSON.parse(atob(first.body.header.value)).payload);
    expect(used.status).toBe("success");
    expect(await checkNow()).toMatchObject({ status: "balanced", differenceBaseUnits: "-300000" });
    await waitFor(
      "confirmations",
      () => client().getBlockNumber(),
      (head) => head >= used.blockNumber + 2n,
    );
    const settled = await reconcileAgentX402Payments(env, Date.now() + 60_000);
    expect(settled?.settled).toBe(1);
    const after = await expectBalanced();
    expect(after.outstandingAuthorizations).toEqual({ count: 0, totalBaseUnits: "0" });
    // One never used: given back after its window (by the chain's block time), still balanced.
    const second = await pay(200_000n, 1);
    expect(second.status, second.text).toBe(201);
    await expectBalanced();
    const validBefore = BigInt(Date.parse(second.body.payment.validBefore) / 1000);
    await waitFor(
      "the trusted block past the window",
      async () => (await client().getBlock({ blockNumber: (await client().getBlockNumber()) - 2n })).timestamp,
      (timestamp) => timestamp >= validBefore,
    );
    const released = await reconcileAgentX402Payments(env, Date.now() + 120_000);
    expect(released?.released).toBe(1);
    const status = await api("GET", `/agent/x402/payments/${second.body.payment.paymentId}`, { token: agent.apiKey });
    expect(status.body.payment.status).toBe("released");
    expect((await expectBalanced()).outstandingAuthorizations).toEqual({ count: 0, totalBaseUnits: "0" });
  });

  it("finds a surplus when tokens arrive outside any payment, and a sub-cent deposit remainder is one", async () => {
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, x.payTo, 4_321n);
    const surplus = await checkNow();
    expect(surplus).toMatchObject({ status: "surplus", differenceBaseUnits: "4321" });
    // A deposit of $1.005: the ledger credits $1.00, the chain holds the rest.
    const agent = await createAgent({ name: "treasury remainder" });
    const depositAddress = (await env.DB.prepare("SELECT deposit_address AS a FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first<Hex>("a"))!;
    await sendTokens(sender, depositAddress, 1_005_000n);
    await creditDeposits();
    const after = await checkNow();
    expect(after).toMatchObject({ status: "surplus", differenceBaseUnits: String(4_321n + 5_000n) });
    expect(after.holdings.depositAddressesBaseUnits).toBe("1005000");
    await sweepToSettlement(env, x);
    expect(await checkNow()).toMatchObject({
      status: "surplus",
      differenceBaseUnits: String(4_321n + 5_000n),
      holdings: { depositAddressesBaseUnits: "0" },
    });
  });

  it("lists the stored checks newest first, limited, and refuses bad limits and other credentials", async () => {
    const token = await consoleToken();
    const all = await api("GET", "/console/treasury/checks?limit=100", { token });
    expect(all.status).toBe(200);
    const stored = (await env.DB.prepare("SELECT COUNT(*) AS n FROM treasury_checks").first<number>("n"))!;
    expect(all.body.checks).toHaveLength(Math.min(stored, 100));
    const checks = all.body.checks as { at: string; asOfBlock: number }[];
    for (let i = 1; i < checks.length; i++) expect(checks[i - 1]!.at >= checks[i]!.at).toBe(true);
    const fresh = await checkNow();
    const latest = await api("GET", "/console/treasury/checks?limit=2", { token });
    expect(latest.body.checks).toHaveLength(2);
    expect(latest.body.checks[0]).toEqual({
      at: expect.any(String),
      asOfBlock: fresh.asOfBlock,
      status: fresh.status,
      differenceBaseUnits: fresh.differenceBaseUnits,
      totalBaseUnits: fresh.holdings.totalBaseUnits,
      expectedBaseUnits: fresh.ledger.expectedBaseUnits,
    });
    const byDefault = await api("GET", "/console/treasury/checks", { token });
    expect(byDefault.body.checks).toHaveLength(Math.min(stored + 1, 20));
    for (const limit of ["0", "101", "-1", "1.5", "ten"]) {
      const bad = await api("GET", `/console/treasury/checks?limit=${limit}`, { token });
      expect(bad.status, limit).toBe(400);
      expect(bad.body.error).toBe("invalid_request");
    }
    const merchant = await createMerchant();
    for (const path of ["/console/treasury", "/console/treasury/checks"]) {
      expect((await api("GET", path)).status).toBe(401);
      expect((await api("GET", path, { token: "not-a-token" })).status).toBe(401);
      const other = await api("GET", path, { token: merchant.apiKey });
      expect(other.status).toBe(403);
      expect(other.body.error).toBe("credential_not_allowed");
    }
  });

  it("books a transaction only once it is as deep as a deposit must be (last: it stops the chain's empty blocks)", async () => {
    // The chain mines each transaction at once and an empty block every 2 s, which could land between
    // a transfer and its booking. With transactions alone (anvil cannot go back to both: this runs
    // last), a transfer stays one block deep until one is mined on top; two confirmations are asked.
    await client().request({ method: "evm_setAutomine" as never, params: [true] as never });
    const sender = await freshSender(10_000_000n);
    const { hash } = await sendTokens(sender, x.payTo, 9_000n);
    const early = await book(hash);
    expect(early.status).toBe(409);
    expect(early.body).toEqual({ error: "funding_not_confirmed" });
    expect(await fundingAuditRows(hash)).toHaveLength(0);
    await deepen();
    const booked = await book(hash);
    expect(booked.status, booked.text).toBe(201);
    expect(booked.body.funding.amountBaseUnits).toBe("9000");
  });
});
