import { type GuardCheck, type SqlStatement, sqlStatement } from "../db/statements";
import { INSUFFICIENT_BALANCE } from "../lib/error-codes";

/*
 * The merchants table's statements that other folders put in their own: columns and conditions for
 * their reads, guards and figures for their batches, and small reads of one row. A merchant's row in
 * a shard other than control is its account there (name, category, balance); its identity (keys,
 * payout address) is control's.
 */

/**
 * The merchant's name, as an SQL expression over `merchantId` (an SQL expression: a column such as
 * `c.merchant_id`, or `?`); null for no such merchant.
 */
export const merchantNameOf = (merchantId: string) => `(SELECT name FROM merchants WHERE id = ${merchantId})`;

/** The merchant's name and category as the columns `merchantName` and `merchantCategory` of a read. */
export const merchantLabelOf = (merchantId: string) =>
  `${merchantNameOf(merchantId)} AS merchantName, (SELECT category FROM merchants WHERE id = ${merchantId}) AS merchantCategory`;

/** How many merchants the database has, as an SQL expression. */
export const MERCHANT_COUNT = "(SELECT COUNT(*) FROM merchants)";

/** The merchant's balance here covers `amountMinor`: a batch that takes money from it checks this. */
export const merchantBalanceAtLeast = (merchantId: string, amountMinor: number): GuardCheck => [
  INSUFFICIENT_BALANCE,
  "EXISTS (SELECT 1 FROM merchants WHERE id = ? AND balance_minor >= ?)",
  merchantId,
  amountMinor,
];

/** The merchant's balance as a batch leaves it: the figure a stored answer is completed with. */
export const merchantBalanceFigure = (merchantId: string): SqlStatement =>
  sqlStatement("SELECT balance_minor FROM merchants WHERE id = ?", merchantId);

/** The merchant's balance in `d1` (its account row there), or null without one. */
/** The merchant's balance covers `baseUnits` exactly: a refund below a cent is checked to the base unit. */
export const merchantBaseUnitsAtLeast = (merchantId: string, baseUnits: number): GuardCheck => [
  INSUFFICIENT_BALANCE,
  "EXISTS (SELECT 1 FROM merchants WHERE id = ? AND balance_base_units >= ?)",
  merchantId,
  baseUnits,
];

/** The merchant's exact balance in base units, or null for no such merchant. */
export async function merchantBaseUnitsIn(d1: D1Database, merchantId: string): Promise<bigint | null> {
  const row = await d1
    .prepare("SELECT CAST(balance_base_units AS TEXT) AS units FROM merchants WHERE id = ?")
    .bind(merchantId)
    .first<{ units: string }>();
  return row ? BigInt(row.units) : null;
}

export async function merchantBalanceIn(d1: D1Database, merchantId: string): Promise<number | null> {
  const row = await d1
    .prepare("SELECT balance_minor AS balanceMinor FROM merchants WHERE id = ?")
    .bind(merchantId)
    .first<{ balanceMinor: number }>();
  return row?.balanceMinor ?? null;
}

/** The merchant's payout address, from its identity in control (`control`); undefined for no such merchant. */
export async function payoutAddressOf(control: D1Database, merchantId: string): Promise<string | null | undefined> {
  const row = await control
    .prepare("SELECT payout_address AS payoutAddress FROM merchants WHERE id = ?")
    .bind(merchantId)
    .first<{ payoutAddress: string | null }>();
  return row ? row.payoutAddress : undefined;
}

/** The names of some merchants, by id, in one query (the ids go as one JSON array: D1 binds at most 100 values). */
export async function merchantNames(d1: D1Database, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await d1
    .prepare("SELECT id, name FROM merchants WHERE id IN (SELECT value FROM json_each(?))")
    .bind(JSON.stringify([...new Set(ids)]))
    .all<{ id: string; name: string }>();
  return new Map(rows.results.map((r) => [r.id, r.name]));
}
