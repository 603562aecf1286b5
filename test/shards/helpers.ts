import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { PolicyInput } from "../../src/agents/policy";
import { auditRowOf } from "../../src/audit/service";
import { dbOf } from "../../src/db/client";
import { dbOfShard } from "../../src/db/shards";
import { genesisHashOf, verifyChain } from "../../src/ledger/chain";
import { homeShard } from "../../src/ledger/directory";
import { recoverTransfers } from "../../src/ledger/transfer-recovery";
import type { FaultPoint } from "../../src/lib/faults";
import { createAgent, createMerchant } from "../helpers/factories";
import type { FaultMode } from "../helpers/faults";

/*
 * Owners on a chosen shard. Placement is deployment-wide (`spread` here: each new owner to a random
 * shard), so an owner on shard k is made by creating owners through the API until one lands there,
 * as the directory says; the others stay, unused. No test-only switch in the service decides it.
 */
const SHARDS = [0, 1] as const;
const MAX_TRIES = 64;

export async function merchantOn(shard: number, options: { name?: string } = {}) {
  for (let i = 0; i < MAX_TRIES; i++) {
    const merchant = await createMerchant(options);
    if ((await homeShard(env, "merchant", merchant.merchantId)) === shard) return merchant;
  }
  throw new Error(`no merchant landed on shard ${shard}`);
}

export async function agentOn(shard: number, options: { credit?: number; policy?: PolicyInput } = {}) {
  for (let i = 0; i < MAX_TRIES; i++) {
    const agent = await createAgent({ policy: options.policy });
    if ((await homeShard(env, "agent", agent.agentId)) === shard) {
      if (options.credit) {
        const { creditAgent } = await import("../helpers/factories");
        await creditAgent(agent.agentId, options.credit);
      }
      return agent;
    }
  }
  throw new Error(`no agent landed on shard ${shard}`);
}

const one = async <T>(shard: number, sql: string, ...params: unknown[]) =>
  (await dbOfShard(env, shard)
    .prepare(sql)
    .bind(...params)
    .first<T>())!;

/** Σ of every ledger entry in a shard, exact (base units: entries below a cent count). */
export const entrySum = async (shard: number) =>
  (await one<{ s: number }>(shard, "SELECT COALESCE(SUM(amount_base_units), 0) AS s FROM ledger_entries")).s;

/** Σ of the transit accounts of a shard: what it sent toward other shards less what it received. */
export const transitSum = async (shard: number) =>
  (
    await one<{ s: number }>(
      shard,
      "SELECT COALESCE(SUM(amount_minor), 0) AS s FROM ledger_entries WHERE account LIKE 'transit:%'",
    )
  ).s;

/** An agent's or merchant's balance in its home shard. */
export const homeBalance = async (kind: "agent" | "merchant", id: string) => {
  const shard = await homeShard(env, kind, id);
  const table = kind === "agent" ? "agents" : "merchants";
  return (await one<{ b: number }>(shard, `SELECT balance_minor AS b FROM ${table} WHERE id = ?`, id)).b;
};

export const pendingTransfers = async () => {
  let n = 0;
  for (const k of SHARDS)
    n += (await one<{ n: number }>(k, "SELECT COUNT(*) AS n FROM ledger_transfers WHERE status = 'pending'")).n;
  return n;
};

/**
 * Money in flight between the two shards: what each sent toward the other, less what the other took
 * in (Σ_0 transit:1 + Σ_1 transit:0). Never negative (a debit lands before its credit), 0 at rest.
 */
export const inFlight = async () => (await transitSum(0)) + (await transitSum(1));

/** Every invariant that holds at rest (exact, in base units): Σ entries 0 per shard, nothing in flight, balances = Σ entries, no pending transfer, chains verify. */
export async function expectShardsAtRest() {
  expect(await inFlight()).toBe(0);
  for (const k of SHARDS) {
    expect(await entrySum(k)).toBe(0);
    const db = dbOfShard(env, k);
    const mismatched = await db
      .prepare(
        `SELECT a.id FROM agents a WHERE a.balance_base_units != COALESCE((SELECT SUM(amount_base_units) FROM ledger_entries WHERE account = 'agent:' || a.id), 0)
         UNION ALL SELECT m.id FROM merchants m WHERE m.balance_base_units != COALESCE((SELECT SUM(amount_base_units) FROM ledger_entries WHERE account = 'merchant:' || m.id), 0)
         UNION ALL SELECT id FROM agents WHERE balance_minor < 0 UNION ALL SELECT id FROM merchants WHERE balance_minor < 0`,
      )
      .all();
    expect(mismatched.results).toEqual([]);
    await expectChainVerifies(k);
  }
  expect(await pendingTransfers()).toBe(0);
}

export async function expectChainVerifies(shard: number) {
  const rows = (
    await dbOf(dbOfShard(env, shard)).query.auditEvents.findMany({ orderBy: (t, { asc }) => [asc(t.seq)] })
  ).map(auditRowOf);
  expect((await verifyChain(rows, { seq: 0, hash: genesisHashOf(shard) })).ok).toBe(true);
}

/** The events the charge's payment put in its shard's outbox, by type. */
export async function paymentEvents(chargeId: string) {
  const { shardOfId } = await import("../../src/db/shards");
  const { results } = await dbOfShard(env, shardOfId(chargeId))
    .prepare(
      "SELECT type FROM outbox_events WHERE json_extract(data, '$.chargeId') = ? AND type IN ('payment.succeeded', 'charge.succeeded') ORDER BY type",
    )
    .bind(chargeId)
    .all<{ type: string }>();
  return results.map((r) => r.type);
}

/** The charge.paid audit rows of a charge, in its shard. */
export async function chargePaidRows(chargeId: string) {
  const { shardOfId } = await import("../../src/db/shards");
  const { results } = await dbOfShard(env, shardOfId(chargeId))
    .prepare("SELECT reference FROM audit_events WHERE type = 'charge.paid' AND charge_id = ?")
    .bind(chargeId)
    .all<{ reference: string }>();
  return results;
}

/** The ledger's seams around a batch and the transfer's between its phases, each thrown and aborted. */
export const TRANSFER_FAULTS: [FaultPoint, FaultMode][] = [
  ["ledger.before_batch", "throw"],
  ["ledger.before_batch", "abort"],
  ["ledger.after_batch", "throw"],
  ["ledger.after_batch", "abort"],
  ["transfer.after_send", "throw"],
  ["transfer.after_send", "abort"],
  ["transfer.after_arrive", "throw"],
  ["transfer.after_arrive", "abort"],
  ["transfer.before_settle", "throw"],
  ["transfer.before_settle", "abort"],
];

/** Who finishes a transfer a fault left pending: the agent's wallet alarm, or the minute cron. */
export type Recovery = "alarm" | "cron";

export const recoverBy = async (how: Recovery, agentId: string) => {
  if (how === "alarm") await runDurableObjectAlarm(env.WALLET.getByName(agentId));
  // The cron takes transfers due a minute after they were sent: run it as a minute and more from now.
  else await recoverTransfers(env, Date.now() + 120_000);
};
