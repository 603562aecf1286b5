import { env } from "cloudflare:workers";
import { createWalletClient, erc20Abi, type Hex, http, toHex } from "viem";
import { privateKeyToAccount, privateKeyToAddress } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { RESEND_AFTER_MS } from "../../src/outbound/advance";
import { advanceDuePayouts, createPayout } from "../../src/payouts/service";
import { api } from "../helpers/api";
import { merchantBalance } from "../helpers/factories";
import { waitFor } from "../helpers/wait";
import { chain, holdNextSend, mintTokens, publicClient, tokenBalance } from "../helpers/x402";
import {
  authorizationUsed,
  fundedMerchant,
  merchantLedger,
  outboxEventsOf,
  payoutEntries,
  payoutOf,
  settled,
  transfersTo,
  treasury,
} from "./fixtures";

/*
 * Payouts sent in settlement batches (the workers-payouts-batch project: X402_SETTLEMENT_BATCH_ADDRESS
 * set, and a settlement address, gas key and receiving key of its own, so this file may take the
 * settlement address's tokens away without touching any other file's payouts). A lane sends a batch
 * once the node answered the one before it, so a batch is made by holding the node's answer to a
 * first, lone payout (the leader) at the relay: the payouts handed over meanwhile go out together.
 */
const UNITS = 10_000n;
/** Long enough for the payouts posted meanwhile to be checked, marked handed over and queued behind the leader. */
const HOLD_MS = 2_500;

const client = () => publicClient();
const giveGas = (address: Hex) =>
  client().request({ method: "anvil_setBalance" as never, params: [address, toHex(10n ** 20n)] as never });

const mintToSettlement = (value: bigint) => mintTokens(treasury().payTo, value);

/** Moves all but `keep` of the settlement address's tokens away (to the chain's account 1), as the settlement key. */
async function drainSettlementTo(keep: bigint) {
  const settlement = createWalletClient({
    account: privateKeyToAccount(treasury().settlementPrivateKey! as Hex),
    transport: http(chain().rpcUrl),
  });
  const balance = await tokenBalance(treasury().payTo);
  const hash = await settlement.writeContract({
    chain: null,
    address: chain().token,
    abi: erc20Abi,
    functionName: "transfer",
    args: [chain().accounts[1]!.address as Hex, balance - keep],
  });
  expect((await client().waitForTransactionReceipt({ hash, pollingInterval: 100 })).status).toBe("success");
  expect(await tokenBalance(treasury().payTo)).toBe(keep);
}

beforeAll(async () => {
  expect(settingsOf(env).x402?.settlementBatch?.address.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
  // This project's own keys: gas for the gas key, and for the settlement address the test acts as.
  await giveGas(privateKeyToAddress(treasury().facilitatorPrivateKeys[0]! as Hex));
  await giveGas(treasury().payTo);
});

const post = (m: { apiKey: string }, cents: number) =>
  api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: cents } }).then((res) => {
    expect(res.status, res.text).toBe(201);
    return res.body.payout.payoutId as string;
  });

/** The payout's transfer row: handed over (broadcast_at), its status and transaction. */
const transferRow = (payoutId: string) =>
  env.DB.prepare(
    "SELECT broadcast_at AS broadcastAt, status, tx_hash AS txHash FROM outbound_transfers WHERE owner_id = ?",
  )
    .bind(payoutId)
    .first<{ broadcastAt: string | null; status: string; txHash: string | null }>();

const handedOver = (payoutId: string) =>
  waitFor(
    `payout ${payoutId} handed over`,
    () => transferRow(payoutId),
    (row) => row?.broadcastAt != null,
  );

/** A leader payout alone on the lane, the node's answer to its send held at the relay for HOLD_MS. */
async function leader() {
  const m = await fundedMerchant(100);
  await holdNextSend(m.address, HOLD_MS);
  const id = await post(m, 100);
  await handedOver(id);
  return { m, id };
}

/** The cron's pass over payouts, at a time when every transfer touched until now is due again. */
const cronPass = () => advanceDuePayouts(env, treasury(), Date.now() + RESEND_AFTER_MS + 5_000);
const NOTHING = { confirmed: 0, failed: 0, waiting: 0 };

describe("payouts in settlement batches", () => {
  it("payouts handed over while a batch is out leave in one transaction, each paid once, the merchant debited once", async () => {
    await mintToSettlement(1_000n * UNITS);
    // Four payouts of one merchant to one address, two of the same value: each Transfer log stands for one payout.
    const m = await fundedMerchant(1_000);
    const first = await leader();
    const cents = [100, 250, 250, 300];
    const ids = await Promise.all(cents.map((c) => post(m, c)));
    expect(await merchantBalance(m.apiKey)).toBe(100);

    const paid = await Promise.all(ids.map((id) => settled(m.apiKey, id)));
    const lead = await settled(first.m.apiKey, first.id);
    expect(lead.status).toBe("paid");
    for (const p of paid) expect(p).toMatchObject({ status: "paid", failureReason: null });
    const batchTx = paid[0]!.transaction as Hex;
    expect(paid.map((p) => p.transaction)).toEqual(ids.map(() => batchTx));
    expect(batchTx).not.toBe(lead.transaction);
    // One transaction, through the batch contract, moving each payout's value once.
    const tx = await client().getTransaction({ hash: batchTx });
    expect(tx.to?.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
    const onChain = await transfersTo(m.address);
    expect(onChain.map((t) => t.transaction)).toEqual(ids.map(() => batchTx));
    expect(onChain.map((t) => t.value).sort()).toEqual(cents.map((c) => BigInt(c) * UNITS).sort());
    expect(await tokenBalance(m.address)).toBe(900n * UNITS);
    for (const id of ids) {
      expect(await transferRow(id)).toMatchObject({ status: "confirmed", txHash: batchTx });
      expect(await outboxEventsOf("payout.paid", id)).toBe(1);
      expect(await outboxEventsOf("payout.failed", id)).toBe(0);
      const c = cents[ids.indexOf(id)]!;
      expect(await payoutEntries(id)).toEqual([
        { transferId: id, account: `merchant:${m.merchantId}`, amountMinor: -c },
        { transferId: id, account: expect.stringMatching(/^external:payouts:/), amountMinor: c },
      ]);
    }
    expect(await merchantLedger(m.merchantId)).toEqual({ cached: 100, entries: 100 });
    // Nothing left for the cron: no payout is sent or recorded again.
    for (const _ of [1, 2]) expect(await cronPass()).toEqual(NOTHING);
    expect(await transfersTo(m.address)).toHaveLength(4);
    expect(await merchantBalance(m.apiKey)).toBe(100);
  });

  it("the cron's pass hands several payouts over side by side: they leave in one batch behind the first, each paid once", async () => {
    await mintToSettlement(1_000n * UNITS);
    const m = await fundedMerchant(500);
    // Taken without their request's send (as if each request had stopped right after its answer).
    const ids = await Promise.all(
      [100, 100, 100, 100, 100].map(
        async (c) => (await createPayout(env, treasury(), m.merchantId, c, undefined)).payout.payoutId,
      ),
    );
    expect(await merchantBalance(m.apiKey)).toBe(0);
    // The lane's first send (a batch of the first payout to reach it) waits for the node's answer: the rest gather.
    await holdNextSend(m.address, HOLD_MS);
    // Each one is sent in this pass; a busy machine may mine them after the pass stopped waiting, and
    // later passes then read the outcome from the chain (sending nothing again, checked below).
    const first = await cronPass();
    expect(first.failed).toBe(0);
    expect(first.confirmed + first.waiting).toBe(5);
    let confirmed = first.confirmed;
    for (let pass = 2; confirmed < 5 && pass < 12; pass++) {
      // A row is due again once untouched for RESEND_AFTER_MS: each pass runs that much later.
      const later = await advanceDuePayouts(env, treasury(), Date.now() + pass * (RESEND_AFTER_MS + 5_000));
      expect(later.failed).toBe(0);
      confirmed += later.confirmed;
    }
    expect(confirmed).toBe(5);
    const paid = await Promise.all(ids.map((id) => payoutOf(m.apiKey, id)));
    for (const p of paid) expect(p).toMatchObject({ status: "paid", failureReason: null });
    const hashes = [...new Set(paid.map((p) => p.transaction as Hex))];
    expect(hashes).toHaveLength(2);
    const onChain = await transfersTo(m.address);
    expect(onChain).toHaveLength(5);
    expect(new Set(onChain.map((t) => t.transaction))).toEqual(new Set(hashes));
    const batched = hashes.find((h) => onChain.filter((t) => t.transaction === h).length === 4);
    expect(batched).toBeDefined();
    expect((await client().getTransaction({ hash: batched! })).to?.toLowerCase()).toBe(
      chain().settlementBatch.toLowerCase(),
    );
    for (const id of ids) expect(await outboxEventsOf("payout.paid", id)).toBe(1);
    expect(await merchantLedger(m.merchantId)).toEqual({ cached: 0, entries: 0 });
    for (const _ of [1, 2]) expect(await cronPass()).toEqual(NOTHING);
    expect(await transfersTo(m.address)).toHaveLength(5);
  });

  it("a payout whose call fails inside a mined batch is not paid; once there is money again it is sent again and paid once", async () => {
    await mintToSettlement(1_000n * UNITS);
    const m = await fundedMerchant(1_000);
    const first = await leader();
    // Handed over one after the other, both checked against a balance that covered them.
    const small = await post(m, 200);
    await handedOver(small);
    const large = await post(m, 500);
    await handedOver(large);
    // Before their batch leaves, the settlement address keeps only the small one's value.
    await drainSettlementTo(200n * UNITS);

    expect(await settled(m.apiKey, small)).toMatchObject({ status: "paid" });
    expect(await settled(first.m.apiKey, first.id)).toMatchObject({ status: "paid" });
    const batchTx = (await payoutOf(m.apiKey, small)).transaction as Hex;
    // The large one's call failed inside the same transaction (its outcome came with the small one's):
    // not paid, not failed, its authorization unused, its row handed over and pending.
    expect(await payoutOf(m.apiKey, large)).toMatchObject({ status: "pending", transaction: null });
    expect(await transferRow(large)).toMatchObject({ status: "pending", txHash: null });
    expect(await authorizationUsed(large)).toBe(false);
    const receipt = await client().waitForTransactionReceipt({ hash: batchTx, pollingInterval: 100 });
    expect(receipt.to?.toLowerCase()).toBe(chain().settlementBatch.toLowerCase());
    expect(await transfersTo(m.address)).toEqual([{ transaction: batchTx, value: 200n * UNITS }]);
    expect(await outboxEventsOf("payout.paid", large)).toBe(0);
    expect(await outboxEventsOf("payout.failed", large)).toBe(0);
    expect(await merchantBalance(m.apiKey)).toBe(300);

    // Money again: the cron sends the same authorization again, and it is paid once.
    await mintToSettlement(1_000n * UNITS);
    expect(await cronPass()).toEqual({ ...NOTHING, confirmed: 1 });
    const paidLarge = await payoutOf(m.apiKey, large);
    expect(paidLarge).toMatchObject({ status: "paid", failureReason: null });
    expect(paidLarge.transaction).not.toBe(batchTx);
    expect(await authorizationUsed(large)).toBe(true);
    const onChain = await transfersTo(m.address);
    expect(onChain).toEqual([
      { transaction: batchTx, value: 200n * UNITS },
      { transaction: paidLarge.transaction, value: 500n * UNITS },
    ]);
    expect(await outboxEventsOf("payout.paid", large)).toBe(1);
    expect(await outboxEventsOf("payout.failed", large)).toBe(0);
    expect(await merchantLedger(m.merchantId)).toEqual({ cached: 300, entries: 300 });
    for (const _ of [1, 2]) expect(await cronPass()).toEqual(NOTHING);
    expect(await transfersTo(m.address)).toHaveLength(2);
  });

  it("a payout address that is the service's own (the batch contract, a gas key, the settlement address) or the token's is refused, nothing stored", async () => {
    const m = await fundedMerchant(100);
    const x = settingsOf(env).x402!;
    const own = [
      chain().settlementBatch,
      privateKeyToAddress(x.facilitatorPrivateKeys[0]!),
      x.payTo,
      x.asset,
      ...(settingsOf(env).auditAnchor ? [settingsOf(env).auditAnchor!] : []),
    ];
    for (const address of own) {
      const res = await api("PUT", "/merchant/payout-address", { token: m.apiKey, body: { address } });
      expect(res.status, address).toBe(400);
      expect(res.body.error).toBe("invalid_request");
    }
    // Still the address it had: a payout goes there, not to the contract.
    const id = await post(m, 100);
    expect(await settled(m.apiKey, id)).toMatchObject({ status: "paid" });
    expect(await transfersTo(m.address)).toHaveLength(1);
    expect(await tokenBalance(chain().settlementBatch)).toBe(0n);
  });
});
