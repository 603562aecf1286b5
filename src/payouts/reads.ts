import { type SqlStatement, sqlStatement } from "../db/statements";

/*
 * Reads of the payouts table for other folders: the console's totals and a receipt's row. A read
 * that joins another folder's in one batch is a statement; one that runs alone runs here.
 */

/** One database's payouts counted and summed (cents) by status; a status without payouts has no row. */
export async function payoutTotalsByStatus(db: D1Database): Promise<{ status: string; n: number; cents: number }[]> {
  const rows = await db
    .prepare("SELECT status, COUNT(*) AS n, COALESCE(SUM(amount_minor), 0) AS cents FROM payouts GROUP BY status")
    .all<{ status: string; n: number; cents: number }>();
  return rows.results;
}

/**
 * The merchant's payout once it is `paid`, as a receipt shows it (id, merchantId, amountMinor,
 * currency, destination, txHash, paidAt); no row while pending, failed, unknown or another merchant's.
 */
export const paidPayoutRow = (payoutId: string, merchantId: string): SqlStatement =>
  sqlStatement(
    `SELECT id, merchant_id AS merchantId, amount_minor AS amountMinor, currency, destination,
       tx_hash AS txHash, paid_at AS paidAt
       FROM payouts WHERE id = ? AND merchant_id = ? AND status = 'paid'`,
    payoutId,
    merchantId,
  );
