import type { Hex } from "viem";
import { depositKeysOf, holdsDepositAddress } from "../agents/deposit-address";
import type { Env, X402Settings } from "../config/env";
import { executeBatch, type SqlStatement } from "../db/statements";
import { sweepableDeposits } from "../deposits/sweepable";
import { placeForLog } from "../ledger/made-places";
import { type Place, placementOf } from "../ledger/place";
import { log } from "../lib/log";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";
import { outboundInsert, sweepWritten } from "../outbound/authorization";
import { sweepablePayments } from "../x402/sweepable";

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

/*
 * Where each piece is: a deposit is credited at its agent's home and an x402 payment lives in its
 * charge's place, so each place's deposits and payments are read (and their sweeps written) in
 * that place's database. Deposit addresses are allocated in control, with the agents' identities:
 * each place reads its deposits first, then their addresses' keys from control.
 */

/**
 * Credited deposits to agents' deposit addresses, oldest first, without a sweep. Blocked deposits
 * (their sender failed screening) stay where they are, held for an operator.
 */
async function dueDeposits(env: Env, x: X402Settings, at: Place, limit: number): Promise<DueSweep[]> {
  const control = placementOf(env).control.db;
  const deposits = await sweepableDeposits(at.db, x, MIN_SWEEP_BASE_UNITS, limit, (d) =>
    [
      `NOT ${sweepWritten(d.id)}`,
      // In control, where agents' identities are, a deposit its agent's key cannot sweep is passed over before the limit.
      ...(at.isControl ? [holdsDepositAddress(d.agentId, d.address)] : []),
    ].join(" AND "),
  );
  if (deposits.length === 0) return [];
  // A deposit address is set once per agent (never changed), so each deposit's is its agent's.
  const agents = await depositKeysOf(
    control,
    deposits.map((d) => d.agentId),
  );
  const agentOf = new Map(agents.map((a) => [a.id, a]));
  return deposits.flatMap((d) => {
    const agent = agentOf.get(d.agentId);
    if (agent?.address !== d.address) return [];
    return [{ ownerId: d.ownerId, from: agent.address as Hex, signer: `deposit:${agent.idx}`, value: d.value }];
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
  // Worst case: the deposits, their keys and the payments read (4), and a row per source written.
  if (!roomFor({ d1Queries: 4 + 2 * limit }, "sweeps_create", placeForLog(at))) return 0;
  const [deposits, payments] = await Promise.all([
    dueDeposits(env, x, at, limit),
    // Settled x402 payments on a charge's or link's receiving address, oldest first, without a sweep.
    sweepablePayments(env, x, at, MIN_SWEEP_BASE_UNITS, limit, sweepWritten),
  ]);
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
