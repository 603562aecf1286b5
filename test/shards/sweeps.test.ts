import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Env, settingsOf, type X402Settings } from "../../src/config/env";
import { dbOfShard, shardOfId } from "../../src/db/shards";
import { homeShard } from "../../src/ledger/directory";
import { setFaultHook } from "../../src/lib/faults";
import { RESEND_AFTER_MS } from "../../src/outbound/advance";
import { createDueSweeps } from "../../src/sweeps/due";
import { sweepToSettlement } from "../../src/sweeps/run";
import { api } from "../helpers/api";
import { creditDeposits } from "../helpers/deposits";
import { createCharge } from "../helpers/factories";
import { freshSender, sendTokens, TOKEN } from "../helpers/tokens";
import { waitFor } from "../helpers/wait";
import { chain, freshPayer, publicClient, tokenBalance, xPaymentFor } from "../helpers/x402";
import { agentOn, merchantOn } from "./helpers";

/*
 * Sweeps with two ledger shards, on the real local chain: a deposit is credited in its agent's
 * home shard and an x402 payment lives in its charge's shard, so each is swept from there: the
 * sweep's row in that shard (its id naming it), sent once, recorded once. And a shard whose
 * database fails does not stop the other's sweeps. Deposit addresses are derived from one key for
 * every file's database: this file's agents start at a random index (as test/sweeps does).
 */

let x: X402Settings;

afterEach(() => setFaultHook(null));

beforeAll(async () => {
  x = settingsOf(env).x402!;
  const first = await agentOn(0);
  const base = 1_000 + Math.floor(Math.random() * 2 ** 30);
  const address = mnemonicToAccount(env.DEPOSIT_MNEMONIC!, { addressIndex: base }).address.toLowerCase();
  await env.DB.prepare("UPDATE agents SET deposit_index = ?, deposit_address = ? WHERE id = ?")
    .bind(base, address, first.agentId)
    .run();
});

/** An agent on `shard` with its deposit address (allocated in control). */
async function depositAgentOn(shard: number) {
  const agent = await agentOn(shard);
  const row = await env.DB.prepare("SELECT deposit_address AS address FROM agents WHERE id = ?")
    .bind(agent.agentId)
    .first<{ address: Hex }>();
  return { ...agent, address: row!.address };
}

/** Sends `value` to an agent's deposit address and credits it; the deposit, read in the agent's home shard. */
async function depositTo(agent: { agentId: string; address: Hex }, value: bigint) {
  const shard = await homeShard(env, "agent", agent.agentId);
  const before = await depositIdsIn(shard, agent.address);
  const sender = await freshSender(value);
  await sendTokens(sender, agent.address, value);
  await creditDeposits();
  const after = await depositIdsIn(shard, agent.address);
  const fresh = after.filter((d) => !before.some((b) => b.id === d.id));
  expect(fresh).toMatchObject([{ status: "credited", value: value.toString() }]);
  return fresh[0]!;
}

const depositIdsIn = async (shard: number, address: string) =>
  (
    await dbOfShard(env, shard)
      .prepare("SELECT id, value, status FROM deposits WHERE address = ? ORDER BY created_at, id")
      .bind(address.toLowerCase())
      .all<{ id: string; value: string; status: string }>()
  ).results;

interface SweepRow {
  id: string;
  shard: number;
  fromAddress: string;
  value: string;
  signer: string;
  status: string;
  txHash: Hex | null;
  broadcastAt: string | null;
}

/** The sweep rows of one deposit or payment, in every shard (each says where it was found). */
async function sweepsOf(ownerId: string): Promise<SweepRow[]> {
  const perShard = await Promise.all(
    [0, 1].map(async (shard) =>
      (
        await dbOfShard(env, shard)
          .prepare(
            `SELECT id, from_address AS fromAddress, value, signer, status, tx_hash AS txHash, broadcast_at AS broadcastAt
             FROM outbound_transfers WHERE purpose = 'sweep' AND owner_id = ?`,
          )
          .bind(ownerId)
          .all<Omit<SweepRow, "shard">>()
      ).results.map((r) => ({ ...r, shard })),
    ),
  );
  return perShard.flat();
}

/** Every token transfer out of `address` on the chain since `fromBlock`. */
async function transfersFrom(address: string, fromBlock: bigint) {
  const logs = await publicClient().getContractEvents({
    address: chain().token,
    abi: TOKEN,
    eventName: "Transfer",
    args: { from: address as Hex },
    fromBlock,
  });
  return logs.map((l) => ({ to: l.args.to!.toLowerCase(), value: l.args.value!, transaction: l.transactionHash }));
}

/**
 * A sweep sent once from `from` to the settlement address since `fromBlock`, recorded once, in
 * `shard`. (Receiving addresses are derived from one key for every file's database, so only what
 * moved since the test began counts.)
 */
async function expectSweptOnce(ownerId: string, shard: number, from: string, value: bigint, fromBlock: bigint) {
  const [sweep, ...more] = await sweepsOf(ownerId);
  expect(more).toEqual([]);
  expect(sweep).toMatchObject({ shard, fromAddress: from.toLowerCase(), value: value.toString(), status: "confirmed" });
  expect(shardOfId(sweep!.id)).toBe(shard);
  const out = await transfersFrom(from, fromBlock);
  expect(out).toEqual([{ to: x.payTo.toLowerCase(), value, transaction: sweep!.txHash }]);
  return sweep!;
}

/** A D1 binding whose database is down: every use throws. */
const downDb = {
  prepare() {
    throw new Error("D1_ERROR: shard down (test)");
  },
  batch() {
    throw new Error("D1_ERROR: shard down (test)");
  },
  exec() {
    throw new Error("D1_ERROR: shard down (test)");
  },
} as unknown as D1Database;

/** The worker's env with one shard's database down. */
const withShardDown = (shard: number): Env =>
  Object.create(env, { [shard === 0 ? "DB" : `DB_SHARD_${shard}`]: { value: downDb } }) as Env;

/** Hands each sweep over and fails right after the send (the answer lost): left pending, handed over. */
function loseEverySendAnswer() {
  let sends = 0;
  setFaultHook((at) => {
    if (at !== "outbound.after_send") return;
    sends++;
    throw new Error("injected fault at outbound.after_send");
  });
  return () => sends;
}

describe("sweeps with two ledger shards", () => {
  it("a shard-1 agent's deposit is swept once, from shard 1's row; later passes move nothing", async () => {
    const startBlock = await publicClient().getBlockNumber();
    const agent = await depositAgentOn(1);
    const deposit = await depositTo(agent, 1_234_567n);
    expect(shardOfId(deposit.id)).toBe(1);

    // The first pass sends it, and its answer is lost: the row stays pending, handed over.
    const sends = loseEverySendAnswer();
    await sweepToSettlement(env, x);
    expect(sends()).toBe(1);
    const [handed, ...none] = await sweepsOf(deposit.id);
    expect(none).toEqual([]);
    expect(handed).toMatchObject({ shard: 1, status: "pending", txHash: null });
    expect(handed!.broadcastAt).not.toBeNull();
    // Sent, its answer lost: it shows on chain once mined (a busy machine mines it a moment later).
    const sent = await waitFor(
      "the sweep's transfer mined",
      () => transfersFrom(agent.address, startBlock).then((t) => t.length),
      (n) => n > 0,
    );
    expect(sent).toBe(1);
    setFaultHook(null);

    // Past the resend window the pass looks at it again: the chain shows it used, recorded, nothing sent again.
    const later = Date.now() + RESEND_AFTER_MS + 5_000;
    expect(await sweepToSettlement(env, x, later)).toMatchObject({ created: 0, confirmed: 1 });
    const sweep = await expectSweptOnce(deposit.id, 1, agent.address, 1_234_567n, startBlock);
    expect(sweep.id).toBe(handed!.id);
    const index = await env.DB.prepare("SELECT deposit_index AS i FROM agents WHERE id = ?")
      .bind(agent.agentId)
      .first<number>("i");
    expect(sweep.signer).toBe(`deposit:${index}`);
    expect(await tokenBalance(agent.address)).toBe(0n);

    // Again, far later: no second row in either shard, nothing stepped, nothing on chain.
    const again = await sweepToSettlement(env, x, later + 2 * RESEND_AFTER_MS);
    expect(again.created).toBe(0);
    await expectSweptOnce(deposit.id, 1, agent.address, 1_234_567n, startBlock);
  });

  it("a shard-1 charge's x402 payment is swept once from its receiving address, from shard 1's row", async () => {
    const startBlock = await publicClient().getBlockNumber();
    const merchant = await merchantOn(1);
    const { chargeId } = await createCharge(merchant.apiKey, 250);
    expect(shardOfId(chargeId)).toBe(1);
    const path = `/charges/${chargeId}/x402`;
    const payer = await freshPayer(2_500_000n);
    const { header, payload } = await xPaymentFor(path, payer.key, 2_500_000n);
    const payTo = (payload.authorization.to as string).toLowerCase();
    const res = await api("GET", path, { headers: { "X-PAYMENT": header } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const payment = await dbOfShard(env, 1)
      .prepare("SELECT id, status FROM x402_payments WHERE charge_id = ?")
      .bind(chargeId)
      .first<{ id: string; status: string }>();
    expect(payment).toMatchObject({ status: "settled" });

    const sends = loseEverySendAnswer();
    await sweepToSettlement(env, x);
    expect(sends()).toBe(1);
    expect(await sweepsOf(payment!.id)).toMatchObject([{ shard: 1, status: "pending" }]);
    setFaultHook(null);

    const later = Date.now() + RESEND_AFTER_MS + 5_000;
    await sweepToSettlement(env, x, later);
    const sweep = await expectSweptOnce(payment!.id, 1, payTo, 2_500_000n, startBlock);
    const idx = await env.DB.prepare("SELECT idx FROM receiving_addresses WHERE address = ?")
      .bind(payTo)
      .first<number>("idx");
    expect(sweep.signer).toBe(`receiving:${idx}`);

    expect((await sweepToSettlement(env, x, later + 2 * RESEND_AFTER_MS)).created).toBe(0);
    await expectSweptOnce(payment!.id, 1, payTo, 2_500_000n, startBlock);
  });

  it("a shard whose database fails does not stop the other shard's sweeps", async () => {
    const startBlock = await publicClient().getBlockNumber();
    const a0 = await depositAgentOn(0);
    const a1 = await depositAgentOn(1);
    const d0 = await depositTo(a0, 300_000n);
    const d1 = await depositTo(a1, 400_000n);

    // Shard 1 down: shard 0's deposit is swept all the same; shard 1's waits, untouched.
    await sweepToSettlement(withShardDown(1), x);
    await expectSweptOnce(d0.id, 0, a0.address, 300_000n, startBlock);
    expect(await sweepsOf(d1.id)).toEqual([]);
    expect(await tokenBalance(a1.address)).toBe(400_000n);

    // Shard 1's sweep written; then shard 0 down (it is read first): shard 1's is still sent and recorded.
    const d0b = await depositTo(a0, 200_000n);
    expect(await createDueSweeps(env, x)).toBeGreaterThanOrEqual(2);
    expect(await sweepsOf(d1.id)).toMatchObject([{ shard: 1, status: "pending" }]);
    expect(await sweepsOf(d0b.id)).toMatchObject([{ shard: 0, status: "pending" }]);
    const run = await sweepToSettlement(withShardDown(0), x);
    expect(run.confirmed).toBeGreaterThanOrEqual(1);
    await expectSweptOnce(d1.id, 1, a1.address, 400_000n, startBlock);
    expect(await sweepsOf(d0b.id)).toMatchObject([{ shard: 0, status: "pending", broadcastAt: null }]);
    expect(await tokenBalance(a0.address)).toBe(200_000n);

    // Shard 0 back: its second deposit is swept too.
    await sweepToSettlement(env, x);
    const [sweep] = await sweepsOf(d0b.id);
    expect(sweep).toMatchObject({ shard: 0, status: "confirmed", value: "200000" });
    expect(await tokenBalance(a0.address)).toBe(0n);
    expect((await transfersFrom(a0.address, startBlock)).map((t) => t.value).sort()).toEqual([200_000n, 300_000n]);
  });
});
