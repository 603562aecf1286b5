import { env } from "cloudflare:workers";
import { createWalletClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { type ApiResponse, api, consoleToken } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import {
  chain,
  freshPayer,
  loseAnswerToSend,
  type Payer,
  publicClient,
  refuseAtRelay,
  relayedSends,
  TOKEN_ABI,
  tokenBalance,
  transfersFrom,
  xPaymentFor,
} from "../helpers/x402";

/*
 * Races on one charge. The payers are fresh keys whose token balances this file
 * sets directly on the local chain (anvil_setStorageAt on the token's balance
 * mapping), so no other test file ever moves their tokens and every delta here
 * is exact even with files running in parallel. payTo is shared by all files,
 * so what reaches it from this file is counted from its Transfer logs.
 */
/** `count` charges of `cents` each and, for each, a payment from one fresh payer funded for all of them. */
async function chargesWithPayments(count: number, cents: number) {
  const value = BigInt(cents) * 10_000n;
  const payer = await freshPayer(BigInt(count) * value);
  const charges = await Promise.all(Array.from({ length: count }, () => createCharge(merchant.apiKey, cents)));
  const payments = await Promise.all(charges.map((charge) => paymentHeader(charge.chargeId, payer, value)));
  return { value, payer, charges, payments };
}

/** A payment for the charge, signed to its receiving address. */
async function paymentHeader(chargeId: string, payer: Payer, value: bigint) {
  const { header, payload } = await xPaymentFor(`/charges/${chargeId}/x402`, payer.key, value);
  return { header, from: payload.authorization.from, nonce: payload.authorization.nonce };
}

const authorizationUsed = (from: Hex, nonce: Hex) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [from, nonce],
  });

/** Does this project's Worker settle through the SettlementBatch contract (the workers-batch project)? */
const batched = () => settingsOf(env).x402?.settlementBatch != null;

const isSettled = (r: ApiResponse) => r.status === 200 && r.body?.settlement?.success === true;

/** A response that is not the winning settlement: a refusal, a pending answer, or the paid charge. Never a 5xx. */
function expectLoserShape(r: ApiResponse) {
  expect(r.status).toBeLessThan(500);
  expect([200, 202, 402]).toContain(r.status);
  if (r.status === 200) expect(r.body).toMatchObject({ status: "paid" });
  if (r.status === 402) expect(r.body.x402Version).toBe(1);
}

async function openPayments(chargeId: string) {
  const rows = await env.DB.prepare("SELECT status FROM x402_payments WHERE charge_id = ?")
    .bind(chargeId)
    .all<{ status: string }>();
  return rows.results.map((r) => r.status);
}

async function expectAuditOk() {
  const res = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(res.body.ok).toBe(true);
}

let merchant: { merchantId: string; apiKey: string };
beforeAll(async () => {
  merchant = await createMerchant({ name: "Race Shop" });
});

describe("x402 races", () => {
  it("20 concurrent valid payments from different payers for one charge: exactly one settles and is credited", async () => {
    const cents = 500;
    const value = BigInt(cents) * 10_000n;
    const payers = await Promise.all(Array.from({ length: 5 }, () => freshPayer(4n * value)));
    const charge = await createCharge(merchant.apiKey, cents);
    // Four distinct authorizations (nonces) per payer: 20 valid payments.
    const payments = await Promise.all(
      payers.flatMap((p) => Array.from({ length: 4 }, () => paymentHeader(charge.chargeId, p, value))),
    );
    expect(new Set(payments.map((p) => p.nonce)).size).toBe(20);
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const startBlock = await publicClient().getBlockNumber();

    const responses = await Promise.all(
      payments.map((p) => api("GET", `/charges/${charge.chargeId}/x402`, { headers: { "X-PAYMENT": p.header } })),
    );

    expect(responses.filter((r) => r.status >= 500)).toEqual([]);
    const winners = responses.filter(isSettled);
    expect(winners).toHaveLength(1);
    for (const r of responses.filter((r) => !isSettled(r))) expectLoserShape(r);
    const transaction = winners[0]!.body.settlement.transaction as Hex;

    // On chain: exactly one of the 20 authorizations was used, one transfer reached the charge's address.
    const used = await Promise.all(payments.map((p) => authorizationUsed(p.from, p.nonce)));
    expect(used.filter(Boolean)).toHaveLength(1);
    const transfers = await transfersFrom(
      payers.map((p) => p.address),
      startBlock,
    );
    expect(transfers).toEqual([{ from: expect.any(String), value, transaction }]);
    const balances = await Promise.all(payers.map((p) => tokenBalance(p.address)));
    expect(balances.reduce((a, b) => a + b, 0n)).toBe(5n * 4n * value - value);

    // The service: paid once, credited once, nothing left open.
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({
      status: "paid",
      method: "x402",
      reference: transaction,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    expect(await openPayments(charge.chargeId)).toEqual(["settled"]);
    const audit = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM audit_events WHERE charge_id = ? AND type = 'charge.paid'",
    )
      .bind(charge.chargeId)
      .first<{ n: number }>();
    expect(audit?.n).toBe(1);
    await expectAuditOk();
  });

  it("12 settlements of different charges at once: the overlapping sends all land, each with its own gas nonce, credited once each", async () => {
    const cents = 100;
    const { payer, charges, payments } = await chargesWithPayments(12, cents);
    const merchantBefore = await merchantBalance(merchant.apiKey);

    const responses = await Promise.all(
      charges.map((c, i) =>
        api("GET", `/charges/${c.chargeId}/x402`, { headers: { "X-PAYMENT": payments[i]!.header } }),
      ),
    );

    expect(responses.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(responses.every(isSettled)).toBe(true);
    // One transaction each; batched, the ones that waited for a send to be answered share one.
    const hashes = [...new Set(responses.map((r) => r.body.settlement.transaction as Hex))];
    if (batched()) expect(hashes.length).toBeLessThanOrEqual(12);
    else expect(hashes).toHaveLength(12);
    // Sent from the one gas account in nonce order: no nonce used twice, every transaction mined successfully.
    const sent = await Promise.all(hashes.map((hash) => publicClient().getTransaction({ hash })));
    expect(new Set(sent.map((t) => t.from.toLowerCase())).size).toBe(1);
    expect(new Set(sent.map((t) => t.nonce)).size).toBe(hashes.length);
    const receipts = await Promise.all(hashes.map((hash) => publicClient().getTransactionReceipt({ hash })));
    expect(receipts.map((r) => r.status)).toEqual(Array(hashes.length).fill("success"));
    // Handed to the node in nonce order, each only after the node answered the one before: sent
    // concurrently they can arrive out of order, and anvil then holds the later ones back for good.
    const relayed = (await relayedSends()).filter((s) => hashes.includes(s.hash)).sort((a, b) => a.nonce - b.nonce);
    expect(relayed.map((s) => s.nonce)).toEqual(sent.map((t) => t.nonce).sort((a, b) => a - b));
    for (let i = 1; i < relayed.length; i++) expect(relayed[i]!.arrived).toBeGreaterThan(relayed[i - 1]!.answered);
    expect(await tokenBalance(payer.address)).toBe(0n);
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + 12 * cents);
    for (const c of charges) expect(await openPayments(c.chargeId)).toEqual(["settled"]);
    await expectAuditOk();
  });

  it("a send the node fails: the ones signed behind it are sent again with fresh nonces, no gap is left, every other settlement lands", async () => {
    const { value, payer, charges, payments } = await chargesWithPayments(6, 100);
    // The first of these sends to reach the node fails there (the payer's address is in its call data),
    // answered late enough for the others to be signed behind it.
    await refuseAtRelay({ containing: payer.address, method: "eth_sendRawTransaction", times: 1, afterMs: 300 });

    const responses = await Promise.all(
      charges.map((c, i) =>
        api("GET", `/charges/${c.chargeId}/x402`, { headers: { "X-PAYMENT": payments[i]!.header } }),
      ),
    );

    // The failed send's outcome is unknown to the service (a node may fail a send it took): pending,
    // watched by reconciliation. All the others settle: none waits behind a nonce the node never got.
    expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 202]);
    const settled = responses.filter(isSettled);
    expect(settled).toHaveLength(5);
    const pending = charges.filter((_, i) => !isSettled(responses[i]!));
    expect(await openPayments(pending[0]!.chargeId)).toEqual(["unknown"]);
    expect(await tokenBalance(payer.address)).toBe(value);
    const refusedNonce = payments[charges.indexOf(pending[0]!)]!.nonce;
    expect(await authorizationUsed(payer.address, refusedNonce)).toBe(false);
    const mined = await Promise.all(
      settled.map((r) => publicClient().getTransactionReceipt({ hash: r.body.settlement.transaction as Hex })),
    );
    expect(mined.map((r) => r.status)).toEqual(Array(5).fill("success"));
  });

  for (const rpcErrorStatus of [200, 400])
    it(`a send the node took but whose answer was lost ('nonce too low' on the way back, HTTP ${rpcErrorStatus}): found by its hash, settled once, never sent twice`, async () => {
      const cents = 100;
      const value = BigInt(cents) * 10_000n;
      const payer = await freshPayer(2n * value);
      const charge = await createCharge(merchant.apiKey, cents);
      const merchantBefore = await merchantBalance(merchant.apiKey);
      const startBlock = await publicClient().getBlockNumber();
      const payment = await paymentHeader(charge.chargeId, payer, value);
      await loseAnswerToSend(payer.address, rpcErrorStatus);

      const response = await api("GET", `/charges/${charge.chargeId}/x402`, {
        headers: { "X-PAYMENT": payment.header },
      });

      expect(isSettled(response)).toBe(true);
      const transaction = response.body.settlement.transaction as Hex;
      expect(await transfersFrom([payer.address], startBlock)).toEqual([
        { from: payer.address.toLowerCase(), value, transaction },
      ]);
      expect(await tokenBalance(payer.address)).toBe(value);
      expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
      expect(await openPayments(charge.chargeId)).toEqual(["settled"]);
    });

  it("a gas nonce another sender took meanwhile: the settler's send is refused by the node, sent again with a fresh nonce, and settles", async () => {
    const cents = 100;
    const value = BigInt(cents) * 10_000n;
    const payer = await freshPayer(2n * value);
    const settle = async () => {
      const charge = await createCharge(merchant.apiKey, cents);
      const response = await api("GET", `/charges/${charge.chargeId}/x402`, {
        headers: { "X-PAYMENT": (await paymentHeader(charge.chargeId, payer, value)).header },
      });
      expect(isSettled(response)).toBe(true);
      return response.body.settlement.transaction as Hex;
    };
    const first = await publicClient().getTransaction({ hash: await settle() });
    // The same gas key sends a transaction of its own: the nonce the settler remembers as next is now used.
    const gasKey = settingsOf(env).x402!.facilitatorPrivateKeys[0]!;
    const own = createWalletClient({ account: privateKeyToAccount(gasKey), transport: http(chain().rpcUrl) });
    const ownHash = await own.sendTransaction({ chain: null, to: own.account.address, value: 0n });
    expect((await publicClient().waitForTransactionReceipt({ hash: ownHash })).status).toBe("success");
    const second = await publicClient().getTransaction({ hash: await settle() });
    expect(second.from.toLowerCase()).toBe(first.from.toLowerCase());
    expect(second.nonce).toBeGreaterThan((await publicClient().getTransaction({ hash: ownHash })).nonce);
    expect(await tokenBalance(payer.address)).toBe(0n);
  });

  it("one payload sent 20 times at once to one charge: one on-chain settlement, one credit", async () => {
    const cents = 275;
    const value = BigInt(cents) * 10_000n;
    const payer = await freshPayer(2n * value);
    const charge = await createCharge(merchant.apiKey, cents);
    const payment = await paymentHeader(charge.chargeId, payer, value);
    const merchantBefore = await merchantBalance(merchant.apiKey);
    const startBlock = await publicClient().getBlockNumber();

    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        api("GET", `/charges/${charge.chargeId}/x402`, { headers: { "X-PAYMENT": payment.header } }),
      ),
    );

    expect(responses.filter((r) => r.status >= 500)).toEqual([]);
    const settled = responses.filter(isSettled);
    expect(settled.length).toBeGreaterThanOrEqual(1);
    for (const r of responses.filter((r) => !isSettled(r))) expectLoserShape(r);
    const transactions = new Set(settled.map((r) => r.body.settlement.transaction));
    expect(transactions.size).toBe(1);
    const [transaction] = [...transactions] as Hex[];

    expect(await tokenBalance(payer.address)).toBe(2n * value - value);
    expect(await transfersFrom([payer.address], startBlock)).toEqual([
      { from: payer.address.toLowerCase(), value, transaction },
    ]);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body).toMatchObject({
      status: "paid",
      method: "x402",
      reference: transaction,
    });
    expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
    expect(await openPayments(charge.chargeId)).toEqual(["settled"]);

    // Afterwards the same payload still answers with that one settlement.
    const resent = await api("GET", `/charges/${charge.chargeId}/x402`, { headers: { "X-PAYMENT": payment.header } });
    expect(resent.status).toBe(200);
    expect(resent.body.settlement?.transaction ?? resent.body.reference).toBe(transaction);
    expect(await tokenBalance(payer.address)).toBe(value);
    await expectAuditOk();
  });

  it("a wallet payment racing an x402 payment on the same charge: never both, the merchant is credited once", async () => {
    const cents = 320;
    const value = BigInt(cents) * 10_000n;
    const agent = await createAgent({ name: "racing wallet", credit: 100_000 });
    // Different head starts for the wallet call, so both orders are exercised; the invariant holds either way.
    const headStarts = [
      { walletDelayMs: 0, x402DelayMs: 0 },
      { walletDelayMs: 0, x402DelayMs: 0 },
      { walletDelayMs: 20, x402DelayMs: 0 },
      { walletDelayMs: 100, x402DelayMs: 0 },
      { walletDelayMs: 0, x402DelayMs: 10 },
      { walletDelayMs: 0, x402DelayMs: 30 },
      { walletDelayMs: 0, x402DelayMs: 60 },
      { walletDelayMs: 0, x402DelayMs: 150 },
    ];
    for (const { walletDelayMs, x402DelayMs } of headStarts) {
      const payer = await freshPayer(value);
      const charge = await createCharge(merchant.apiKey, cents);
      const payment = await paymentHeader(charge.chargeId, payer, value);
      const merchantBefore = await merchantBalance(merchant.apiKey);
      const agentBefore = await balanceOf(agent.apiKey);

      const [wallet, onChain] = await Promise.all([
        new Promise((r) => setTimeout(r, walletDelayMs)).then(() => payCharge(agent.apiKey, charge.chargeId)),
        new Promise((r) => setTimeout(r, x402DelayMs)).then(() =>
          api("GET", `/charges/${charge.chargeId}/x402`, { headers: { "X-PAYMENT": payment.header } }),
        ),
      ]);
      expect(wallet.status).toBeLessThan(500);
      expect(onChain.status).toBeLessThan(500);

      const read = (await api("GET", `/charges/${charge.chargeId}`)).body;
      expect(read.status).toBe("paid");
      expect(await merchantBalance(merchant.apiKey)).toBe(merchantBefore + cents);
      const postings = await env.DB.prepare(
        "SELECT COUNT(*) AS n FROM ledger_entries WHERE account = ? AND amount_minor > 0 AND transfer_id = ?",
      )
        .bind(`merchant:${merchant.merchantId}`, read.reference)
        .first<{ n: number }>();
      expect(postings?.n).toBe(1);
      const tokensMoved = await authorizationUsed(payment.from, payment.nonce);

      if (read.method === "ledger") {
        expect(wallet.status).toBe(200);
        expect(isSettled(onChain)).toBe(false);
        expect([200, 402]).toContain(onChain.status);
        expect(tokensMoved).toBe(false);
        expect(await tokenBalance(payer.address)).toBe(value);
        expect(await balanceOf(agent.apiKey)).toBe(agentBefore - cents);
      } else {
        expect(read.method).toBe("x402");
        expect(isSettled(onChain)).toBe(true);
        expect(read.reference).toBe(onChain.body.settlement.transaction);
        expect(wallet.status).toBe(409);
        expect(tokensMoved).toBe(true);
        expect(await tokenBalance(payer.address)).toBe(0n);
        expect(await balanceOf(agent.apiKey)).toBe(agentBefore);
      }
      expect((await openPayments(charge.chargeId)).filter((s) => s === "settling" || s === "unknown")).toEqual([]);
    }
    await expectAuditOk();
  });
});
