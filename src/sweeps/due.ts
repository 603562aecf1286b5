import type { Hex } from "viem";
import { executeBatch, type SqlStatement } from "../db/statements";
import type { Env, X402Settings } from "../config/env";
import { placeForLog } from "../ledger/made-places";
import { placementOf, type Place } from "../ledger/place";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { outboundInsert } from "../outbound/authorization";

/** How many new sweeps one cron run writes, per kind of source. */
export const SWEEPS_PER_RUN = 50;

/**
 * Below one cent a sweep costs more gas than it moves, and anyone could make the service pay for
 * many: such remnants stay where they landed (the treasury counts them as a surplus).
 */
export const MIN_SWEEP_BASE_UNITS = 10_000;

/** Tokens the service holds on one of its receiving addresses, owed to the settlement address. */
export interface DueSweep {
  /** The deposit or x402 payment the tokens came with: one sweep each. */
  ownerId: string;
  from: Hex;
  /** `deposit:<index>` or `receiving:<index>`: how the address's key is derived. */
  signer: string;
  /** Token base units, as a decimal string. */
  value: string;
}

const notSwept = (owner: string) =>
  `NOT EXISTS (SELECT 1 FROM outbound_transfers o WHERE o.purpose = 'sweep' AND o.owner_id = ${owner})`;

/*
 * Where each piece is: a deposit is credited at its agent's home and an x402 payment lives in its
 * charge's place, so each place's deposits and payments are read (and their sweeps written) in
 * that place's database. Deposit addresses and receiving addresses are allocated in control:
 * control joins them in one query as it always did; any other place reads its deposits or
 * payments first, then their addresses' keys from control.
 */

/**
 * Credited deposits to agents' deposit addresses, oldest first, without a sweep. Blocked deposits
 * (their sender failed screening) stay where they are, held for an operator.
 */
async function dueDeposits(env: Env, x: X402Settings, at: Place, limit: number): Promise<DueSweep[]> {
  const control = placementOf(env).control.db;
  if (at.isControl)
    return (
      await control
        .prepare(
          `SELECT d.id AS ownerId, a.deposit_address AS "from", 'deposit:' || a.deposit_index AS signer, d.value
     FROM deposits d JOIN agents a ON a.id = d.agent_id AND a.deposit_address = d.address
     WHERE d.status = 'credited' AND d.network = ? AND a.deposit_index IS NOT NULL
       AND CAST(d.value AS INTEGER) >= ? AND d.address <> ? AND ${notSwept("d.id")}
     ORDER BY d.created_at, d.id LIMIT ?`,
        )
        .bind(x.network, MIN_SWEEP_BASE_UNITS, x.payTo.toLowerCase(), limit)
        .all<DueSweep>()
    ).results;
  const deposits = await at.db
    .prepare(
      `SELECT d.id AS ownerId, d.agent_id AS agentId, d.address, d.value FROM deposits d
       WHERE d.status = 'credited' AND d.network = ? AND CAST(d.value AS INTEGER) >= ? AND d.address <> ? AND ${notSwept("d.id")}
       ORDER BY d.created_at, d.id LIMIT ?`,
    )
    .bind(x.network, MIN_SWEEP_BASE_UNITS, x.payTo.toLowerCase(), limit)
    .all<{ ownerId: string; agentId: string; address: string; value: string }>();
  if (deposits.results.length === 0) return [];
  // A deposit address is set once per agent (never changed), so each deposit's is its agent's.
  const agents = await control
    .prepare(
      `SELECT id, deposit_address AS address, deposit_index AS idx FROM agents
     WHERE id IN (SELECT value FROM json_each(?)) AND deposit_index IS NOT NULL AND deposit_address IS NOT NULL`,
    )
    .bind(JSON.stringify([...new Set(deposits.results.map((d) => d.agentId))]))
    .all<{ id: string; address: string; idx: number }>();
  const agentOf = new Map(agents.results.map((a) => [a.id, a]));
  return deposits.results.flatMap((d) => {
    const agent = agentOf.get(d.agentId);
    if (agent?.address !== d.address) return [];
    return [{ ownerId: d.ownerId, from: agent.address as Hex, signer: `deposit:${agent.idx}`, value: d.value }];
  });
}

/**
 * Settled x402 payments that landed on a charge's or link's receiving address, oldest first,
 * without a sweep. A payment to the settlement address itself (no `pay_to`, or `pay_to` it) is
 * already where sweeps take money, and joins no receiving address.
 */
async function duePayments(env: Env, x: X402Settings, at: Place, limit: number): Promise<DueSweep[]> {
  const control = placementOf(env).control.db;
  if (at.isControl)
    return (
      await control
        .prepare(
          `SELECT p.id AS ownerId, r.address AS "from", 'receiving:' || r.idx AS signer, p.value
     FROM x402_payments p JOIN receiving_addresses r ON r.address = p.pay_to
     WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?
       AND CAST(p.value AS INTEGER) >= ? AND p.pay_to <> ? AND ${notSwept("p.id")}
     ORDER BY p.updated_at, p.id LIMIT ?`,
        )
        .bind(x.network, x.asset.toLowerCase(), MIN_SWEEP_BASE_UNITS, x.payTo.toLowerCase(), limit)
        .all<DueSweep>()
    ).results;
  const payments = await at.db
    .prepare(
      `SELECT p.id AS ownerId, p.pay_to AS payTo, p.value FROM x402_payments p
       WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?
         AND CAST(p.value AS INTEGER) >= ? AND p.pay_to <> ? AND ${notSwept("p.id")}
       ORDER BY p.updated_at, p.id LIMIT ?`,
    )
    .bind(x.network, x.asset.toLowerCase(), MIN_SWEEP_BASE_UNITS, x.payTo.toLowerCase(), limit)
    .all<{ ownerId: string; payTo: string; value: string }>();
  if (payments.results.length === 0) return [];
  const addresses = await control
    .prepare("SELECT idx, address FROM receiving_addresses WHERE address IN (SELECT value FROM json_each(?))")
    .bind(JSON.stringify([...new Set(payments.results.map((p) => p.payTo))]))
    .all<{ idx: number; address: string }>();
  const indexOf = new Map(addresses.results.map((a) => [a.address, a.idx]));
  return payments.results.flatMap((p) => {
    const idx = indexOf.get(p.payTo);
    return idx === undefined
      ? []
      : [{ ownerId: p.ownerId, from: p.payTo as Hex, signer: `receiving:${idx}`, value: p.value }];
  });
}

/**
 * Writes the sweep transfers owed now (at most `limit` of each kind in each place), each to the
 * settlement address for exactly the value that came in, in the place of the deposit or payment it
 * sweeps (its id carries it, `otx_s1_…`). A row per deposit or payment, ever: the insert does
 * nothing when its owner already has one (a concurrent run wrote it first), so runs side by side,
 * or again after a crash, never make a second. Each place on its own: one whose database fails is
 * logged, and the others' sweeps are still written.
 */
export async function createDueSweeps(env: Env, x: X402Settings, limit = SWEEPS_PER_RUN): Promise<number> {
  const places = placementOf(env).each();
  const written = await Promise.allSettled(places.map((at) => createDueSweepsAt(env, x, at, limit)));
  let created = 0;
  for (const [i, w] of written.entries()) {
    if (w.status === "fulfilled") created += w.value;
    else log.error("sweeps_shard_unavailable", { ...placeForLog(places[i]!), error: w.reason });
  }
  return created;
}

async function createDueSweepsAt(env: Env, x: X402Settings, at: Place, limit: number): Promise<number> {
  const [deposits, payments] = await Promise.all([dueDeposits(env, x, at, limit), duePayments(env, x, at, limit)]);
  const due = [...deposits, ...payments];
  if (due.length === 0) return 0;
  const createdAt = nowIso();
  const statements: SqlStatement[] = due.map((s) => {
    const { statement } = outboundInsert(x, {
      at,
      purpose: "sweep",
      ownerId: s.ownerId,
      from: s.from,
      signer: s.signer,
      to: x.payTo,
      value: BigInt(s.value),
      createdAt,
    });
    return { ...statement, sql: `${statement.sql} ON CONFLICT DO NOTHING` };
  });
  const results = await executeBatch(at.db, statements);
  return results.reduce((n, r) => n + (r.meta.changes ?? 0), 0);
}
