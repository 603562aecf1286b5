import type { Hex } from "viem";
import { executeBatch, type SqlStatement } from "../db/statements";
import type { Env, X402Settings } from "../env";
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

/**
 * Credited deposits to agents' deposit addresses, oldest first, without a sweep. Blocked deposits
 * (their sender failed screening) stay where they are, held for an operator.
 */
function dueDeposits(env: Env, x: X402Settings, limit: number) {
  return env.DB.prepare(
    `SELECT d.id AS ownerId, a.deposit_address AS "from", 'deposit:' || a.deposit_index AS signer, d.value
     FROM deposits d JOIN agents a ON a.id = d.agent_id AND a.deposit_address = d.address
     WHERE d.status = 'credited' AND d.network = ? AND a.deposit_index IS NOT NULL
       AND CAST(d.value AS INTEGER) >= ? AND d.address <> ? AND ${notSwept("d.id")}
     ORDER BY d.created_at, d.id LIMIT ?`,
  )
    .bind(x.network, MIN_SWEEP_BASE_UNITS, x.payTo.toLowerCase(), limit)
    .all<DueSweep>();
}

/**
 * Settled x402 payments that landed on a charge's or link's receiving address, oldest first,
 * without a sweep. A payment to the settlement address itself (no `pay_to`, or `pay_to` it) is
 * already where sweeps take money, and joins no receiving address.
 */
function duePayments(env: Env, x: X402Settings, limit: number) {
  return env.DB.prepare(
    `SELECT p.id AS ownerId, r.address AS "from", 'receiving:' || r.idx AS signer, p.value
     FROM x402_payments p JOIN receiving_addresses r ON r.address = p.pay_to
     WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?
       AND CAST(p.value AS INTEGER) >= ? AND p.pay_to <> ? AND ${notSwept("p.id")}
     ORDER BY p.updated_at, p.id LIMIT ?`,
  )
    .bind(x.network, x.asset.toLowerCase(), MIN_SWEEP_BASE_UNITS, x.payTo.toLowerCase(), limit)
    .all<DueSweep>();
}

/**
 * Writes the sweep transfers owed now (at most `limit` of each kind), each to the settlement
 * address for exactly the value that came in. A row per deposit or payment, ever: the insert
 * does nothing when its owner already has one (a concurrent run wrote it first), so runs side by
 * side, or again after a crash, never make a second.
 */
export async function createDueSweeps(env: Env, x: X402Settings, limit = SWEEPS_PER_RUN): Promise<number> {
  const [deposits, payments] = await Promise.all([dueDeposits(env, x, limit), duePayments(env, x, limit)]);
  const due = [...deposits.results, ...payments.results];
  if (due.length === 0) return 0;
  const createdAt = nowIso();
  const statements: SqlStatement[] = due.map((s) => {
    const { statement } = outboundInsert(x, {
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
  const results = await executeBatch(env.DB, statements);
  return results.reduce((n, r) => n + (r.meta.changes ?? 0), 0);
}
