import { env } from "cloudflare:workers";
import { type Hex, keccak256, parseEventLogs, toHex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { type Env, settingsOf, type X402Settings } from "../../src/config/env";
import { sweepToSettlement } from "../../src/sweeps/run";
import { api, consoleToken } from "../helpers/api";
import { cronTick } from "../helpers/cron";
import { creditDeposits } from "../helpers/deposits";
import { createAgent, createCharge, createMerchant } from "../helpers/factories";
import { freshSender, sendTokens, setTokens, TOKEN } from "../helpers/tokens";
import { chain, freshPayer, publicClient, tokenBalance, xPaymentFor } from "../helpers/x402";

/*
 * Sweeps on the real local chain: what lands on the service's receiving addresses (agents' deposit
 * addresses, charges' receiving addresses) moves on to the settlement address, each deposit or
 * payment once. Other files share the chain and the settlement address, so what reached it is read
 * from each sweep's own receipt, never from its balance. Deposit addresses are derived from one
 * key for every file's database: this file's agents start at a random index, so no other file's
 * deposits land on (or are swept from) this file's addresses.
 */
let x: X402Settings;

/** A new agent and its deposit address. */
async function depositAgent(name: string) {
  const agent = await createAgent({ name });
  const row = await env.DB.prepare("SELECT deposit_address AS address FROM agents WHERE id = ?")
    .bind(agent.agentId)
    .first<{ address: Hex }>();
  return { ...agent, address: row!.address };
}

interface SweepRow {
  id: string;
  ownerId: string;
  fromAddress: string;
  toAddress: string;
  value: string;
  signer: string;
  status: string;
  txHash: Hex | null;
  failureReason: string | null;
  broadcastAt: string | null;
}

const sweepsOf = async (ownerIds: string[]) =>
  (
    await env.DB.prepare(
      `SELECT id, owner_id AS ownerId, from_address AS fromAddress, to_address AS toAddress, value, signer, status,
              tx_hash AS txHash, failure_reason AS failureReason, broadcast_at AS broadcastAt
       FROM outbound_transfers WHERE purpose = 'sweep' AND owner_id IN (${ownerIds.map(() => "?").join(", ")})`,
    )
      .bind(...ownerIds)
      .all<SweepRow>()
  ).results;

const depositsTo = async (address: string) =>
  (
    await env.DB.prepare("SELECT id, value, status FROM deposits WHERE address = ? ORDER BY created_at, id")
      .bind(address.toLowerCase())
      .all<{ id: string; value: string; status: string }>()
  ).results;

/** The token transfers a transaction made. */
async function transfersIn(hash: Hex) {
  const receipt = await publicClient().getTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
  return parseEventLogs({ abi: TOKEN, eventName: "Transfer", logs: receipt.logs }).map((l) => ({
    from: l.args.from.toLowerCase(),
    to: l.args.to.toLowerCase(),
    value: l.args.value,
  }));
}

/** Every token transfer out of `address` since `fromBlock`. */
async function transfersFrom(address: Hex, fromBlock: bigint) {
  const logs = await publicClient().getContractEvents({
    address: chain().token,
    abi: TOKEN,
    eventName: "Transfer",
    args: { from: address },
    fromBlock,
  });
  return logs.map((l) => ({ to: l.args.to!.toLowerCase(), value: l.args.value! }));
}

beforeAll(async () => {
  x = settingsOf(env).x402!;
  // Move this database's deposit indexes to a random base (see above): later agents take the next ones.
  const first = await createAgent({ name: "index base" });
  const base = 1_000 + Math.floor(Math.random() * 2 ** 30);
  const address = mnemonicToAccount(env.DEPOSIT_MNEMONIC!, { addressIndex: base }).address.toLowerCase();
  await env.DB.prepare("UPDATE agents SET deposit_index = ?, deposit_address = ? WHERE id = ?")
    .bind(base, address, first.agentId)
    .run();
});

describe("sweeps to the settlement address", () => {
  it("sweeps a credited deposit once, even when runs go side by side and again", async () => {
    const agent = await depositAgent("sweep once");
    const startBlock = await publicClient().getBlockNumber();
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, agent.address, 1_234_567n);
    await creditDeposits();
    const [deposit] = await depositsTo(agent.address);
    expect(deposit).toMatchObject({ value: "1234567", status: "credited" });
    expect(await tokenBalance(agent.address)).toBe(1_234_567n);

    await Promise.all([sweepToSettlement(env, x), sweepToSettlement(env, x)]);
    await sweepToSettlement(env, x);

    const index = (await env.DB.prepare("SELECT deposit_index AS i FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first<number>("i"))!;
    const [sweep, ...more] = await sweepsOf([deposit!.id]);
    expect(more).toEqual([]);
    expect(sweep).toMatchObject({
      fromAddress: agent.address.toLowerCase(),
      toAddress: x.payTo.toLowerCase(),
      value: "1234567",
      signer: `deposit:${index}`,
      status: "confirmed",
      failureReason: null,
    });
    expect(await transfersIn(sweep!.txHash!)).toEqual([
      { from: agent.address.toLowerCase(), to: x.payTo.toLowerCase(), value: 1_234_567n },
    ]);
    expect(await tokenBalance(agent.address)).toBe(0n);
    // The chain shows one transfer out of the deposit address, whatever ran.
    expect(await transfersFrom(agent.address, startBlock)).toEqual([{ to: x.payTo.toLowerCase(), value: 1_234_567n }]);
  });

  it("the minute cron sweeps", async () => {
    const agent = await depositAgent("swept by the cron");
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, agent.address, 500_000n);
    await creditDeposits();
    const [deposit] = await depositsTo(agent.address);
    await cronTick(env as Env);
    expect(await sweepsOf([deposit!.id])).toMatchObject([{ status: "confirmed", value: "500000" }]);
    expect(await tokenBalance(agent.address)).toBe(0n);
  });

  it("two deposits to one address are two sweeps, each of its own value", async () => {
    const agent = await depositAgent("two deposits");
    const startBlock = await publicClient().getBlockNumber();
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, agent.address, 2_000_000n);
    await sendTokens(sender, agent.address, 19_999n);
    await creditDeposits();
    const deposits = await depositsTo(agent.address);
    expect(deposits.map((d) => d.value).sort()).toEqual(["19999", "2000000"]);

    await sweepToSettlement(env, x);

    const sweeps = await sweepsOf(deposits.map((d) => d.id));
    expect(sweeps).toHaveLength(2);
    for (const d of deposits) {
      const sweep = sweeps.find((s) => s.ownerId === d.id)!;
      expect(sweep).toMatchObject({ status: "confirmed", value: d.value });
      expect(await transfersIn(sweep.txHash!)).toEqual([
        { from: agent.address.toLowerCase(), to: x.payTo.toLowerCase(), value: BigInt(d.value) },
      ]);
    }
    expect(await tokenBalance(agent.address)).toBe(0n);
    expect((await transfersFrom(agent.address, startBlock)).map((t) => t.value).sort()).toEqual([19_999n, 2_000_000n]);
  });

  it("leaves a blocked deposit where it landed, held for an operator", async () => {
    const agent = await depositAgent("blocked deposit");
    const sender = await freshSender(10_000_000n);
    const listed = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: sender.account.address, reason: "test: flagged sender" },
    });
    expect(listed.status).toBe(201);
    await sendTokens(sender, agent.address, 3_000_000n);
    await creditDeposits();
    const [deposit] = await depositsTo(agent.address);
    expect(deposit).toMatchObject({ status: "blocked", value: "3000000" });

    await sweepToSettlement(env, x);

    expect(await sweepsOf([deposit!.id])).toEqual([]);
    expect(await tokenBalance(agent.address)).toBe(3_000_000n);
  });

  it("a deposit address holding less than the deposit: failed with treasury_insufficient_funds, never retried", async () => {
    const agent = await depositAgent("tokens gone");
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, agent.address, 4_000_000n);
    await creditDeposits();
    const [deposit] = await depositsTo(agent.address);
    expect(deposit).toMatchObject({ status: "credited" });
    // Someone with the key moved part of it away.
    await setTokens(agent.address, 3_999_999n);

    await sweepToSettlement(env, x);
    const [failed, ...more] = await sweepsOf([deposit!.id]);
    expect(more).toEqual([]);
    expect(failed).toMatchObject({
      status: "failed",
      failureReason: "treasury_insufficient_funds",
      broadcastAt: null,
      txHash: null,
    });

    // The tokens come back: the failed sweep stays failed, and no second one is made.
    await setTokens(agent.address, 4_000_000n);
    await sweepToSettlement(env, x);
    expect(await sweepsOf([deposit!.id])).toEqual([failed]);
    expect(await tokenBalance(agent.address)).toBe(4_000_000n);
  });

  it("sweeps an x402 payment from its charge's receiving address", async () => {
    const merchant = await createMerchant({ name: "Sweep Shop" });
    const charge = await createCharge(merchant.apiKey, 250);
    const path = `/charges/${charge.chargeId}/x402`;
    const payer = await freshPayer(10_000_000n);
    const { header, payload } = await xPaymentFor(path, payer.key, 2_500_000n);
    const payTo = payload.authorization.to as Hex;
    expect((await api("GET", path, { headers: { "X-PAYMENT": header } })).status).toBe(200);
    expect(await tokenBalance(payTo)).toBe(2_500_000n);
    const payment = await env.DB.prepare("SELECT id, status, pay_to AS payTo FROM x402_payments WHERE charge_id = ?")
      .bind(charge.chargeId)
      .first<{ id: string; status: string; payTo: string }>();
    expect(payment).toMatchObject({ status: "settled", payTo: payTo.toLowerCase() });
    const idx = await env.DB.prepare("SELECT idx FROM receiving_addresses WHERE address = ?")
      .bind(payTo.toLowerCase())
      .first<number>("idx");

    await Promise.all([sweepToSettlement(env, x), sweepToSettlement(env, x)]);
    await sweepToSettlement(env, x);

    const [sweep, ...more] = await sweepsOf([payment!.id]);
    expect(more).toEqual([]);
    expect(sweep).toMatchObject({
      fromAddress: payTo.toLowerCase(),
      toAddress: x.payTo.toLowerCase(),
      value: "2500000",
      signer: `receiving:${idx}`,
      status: "confirmed",
    });
    expect(await transfersIn(sweep!.txHash!)).toEqual([
      { from: payTo.toLowerCase(), to: x.payTo.toLowerCase(), value: 2_500_000n },
    ]);
    expect(await tokenBalance(payTo)).toBe(0n);
  });

  it("x402 payments made to the settlement address itself need no sweep", async () => {
    const insert = (id: string, payTo: string | null) =>
      env.DB.prepare(
        `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, pay_to, value, valid_before, payload, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'ch_none', ?, '1000000', 0, '{}', 'settled', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z')`,
      )
        .bind(id, x.network, x.asset.toLowerCase(), `0x${"1".repeat(40)}`, keccak256(toHex(id)), payTo)
        .run();
    await insert("x402_direct_legacy", null);
    await insert("x402_direct_settlement", x.payTo.toLowerCase());
    await sweepToSettlement(env, x);
    expect(await sweepsOf(["x402_direct_legacy", "x402_direct_settlement"])).toEqual([]);
  });
});
