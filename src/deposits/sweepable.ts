import type { X402Settings } from "../config/env";

/** A credited deposit a sweep may take to the settlement address. */
export interface SweepableDeposit {
  ownerId: string;
  agentId: string;
  /** The deposit address it landed on. */
  address: string;
  /** Token base units, as a decimal string. */
  value: string;
}

/** The SQL expressions naming a deposit's columns in sweepableDeposits' statement. */
export interface DepositColumns {
  id: string;
  agentId: string;
  address: string;
}

/**
 * Credited deposits on the deployment's network of at least `minValue` base units, not to the
 * settlement address itself, and meeting `also` (an SQL condition over the deposit's columns, which
 * the caller makes: no sweep of it yet, say), oldest first. Blocked deposits (their sender failed
 * screening) are not credited: they stay where they landed, held for an operator.
 */
export async function sweepableDeposits(
  db: D1Database,
  x: X402Settings,
  minValue: number,
  limit: number,
  also: (d: DepositColumns) => string,
): Promise<SweepableDeposit[]> {
  const rows = await db
    .prepare(
      `SELECT d.id AS ownerId, d.agent_id AS agentId, d.address, d.value FROM deposits d
       WHERE d.status = 'credited' AND d.network = ? AND CAST(d.value AS INTEGER) >= ? AND d.address <> ?
         AND ${also({ id: "d.id", agentId: "d.agent_id", address: "d.address" })}
       ORDER BY d.created_at, d.id LIMIT ?`,
    )
    .bind(x.network, minValue, x.payTo.toLowerCase(), limit)
    .all<SweepableDeposit>();
  return rows.results;
}

/** True when a deposit names the transaction `txHash` (an SQL expression, lowercase). */
export const depositOfTransaction = (txHash: string) =>
  `EXISTS (SELECT 1 FROM deposits WHERE lower(tx_hash) = ${txHash})`;
