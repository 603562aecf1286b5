import { type SqlStatement, sqlStatement } from "../db/statements";

/*
 * The ledger's side of archiving history (src/archive/): which entries a segment takes, the entries
 * themselves, and the batch statements that delete them while adding them to their accounts'
 * carried totals (archived_balances), so an account's balance is always its carried total plus the
 * sum of its live entries.
 */

/** A ledger entry as an archive segment holds it. */
export interface ArchivedLedgerEntry {
  id: number;
  transferId: string;
  account: string;
  amountMinor: number;
  /** Absent from entries archived before amounts below a cent existed. */
  amountBaseUnits?: number;
  createdAt: string;
}

/**
 * The id of the last ledger entry of the next segment: entries after `afterEntryId` (at most
 * `maxEntries` of ids), up to the first made at or after `boundary`. Ids are handed out in commit
 * order, so no entry can later appear at or below the id this returns.
 */
export async function lastEntryBefore(
  d1: D1Database,
  afterEntryId: number,
  boundary: string,
  maxEntries: number,
): Promise<number> {
  const row = await d1
    .prepare(
      `WITH w AS (SELECT MIN(id) AS lo FROM ledger_entries WHERE id > ?1)
       SELECT COALESCE(
         (SELECT MIN(e.id) - 1 FROM ledger_entries e, w WHERE e.id >= w.lo AND e.id < w.lo + ?2 AND e.created_at >= ?3),
         (SELECT MAX(e.id) FROM ledger_entries e, w WHERE e.id >= w.lo AND e.id < w.lo + ?2),
         ?1) AS lastId`,
    )
    .bind(afterEntryId, maxEntries, boundary)
    .first<{ lastId: number }>();
  return Math.max(row?.lastId ?? afterEntryId, afterEntryId);
}

/** How many ledger entries with ids after `afterId` up to `lastId` are still in D1. */
export async function entryCountBetween(d1: D1Database, afterId: number, lastId: number): Promise<number> {
  const counted = await d1
    .prepare("SELECT COUNT(*) AS n FROM ledger_entries WHERE id > ? AND id <= ?")
    .bind(afterId, lastId)
    .first<{ n: number }>();
  return counted?.n ?? 0;
}

/** Ledger entries with ids after `afterId` up to `lastId` still in D1, in id order. */
export async function liveLedgerEntries(
  d1: D1Database,
  afterId: number,
  lastId: number,
): Promise<ArchivedLedgerEntry[]> {
  const { results } = await d1
    .prepare(
      `SELECT id, transfer_id AS transferId, account, amount_minor AS amountMinor, amount_base_units AS amountBaseUnits,
         created_at AS createdAt
       FROM ledger_entries WHERE id > ? AND id <= ? ORDER BY id`,
    )
    .bind(afterId, lastId)
    .all<ArchivedLedgerEntry>();
  return results;
}

/**
 * The statements of a delete batch that take the `limit` lowest entries after `afterId` up to
 * `lastId`: `carry` adds them to their accounts' carried totals, then `remove` deletes them (its
 * changes are how many went). Their subqueries pick the same ids twice inside the one batch.
 */
export function archiveEntryPage(
  afterId: number,
  lastId: number,
  limit: number,
): [carry: SqlStatement, remove: SqlStatement] {
  const ids = `SELECT id FROM ledger_entries WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ${Math.trunc(limit)}`;
  return [
    sqlStatement(
      `INSERT INTO archived_balances (account, carried_minor, carried_base_units, entries)
       SELECT account, SUM(amount_minor), SUM(amount_base_units), COUNT(*) FROM ledger_entries WHERE id IN (${ids}) GROUP BY account
       ON CONFLICT (account) DO UPDATE SET carried_minor = carried_minor + excluded.carried_minor,
         carried_base_units = carried_base_units + excluded.carried_base_units, entries = entries + excluded.entries`,
      afterId,
      lastId,
    ),
    sqlStatement(`DELETE FROM ledger_entries WHERE id IN (${ids})`, afterId, lastId),
  ];
}
