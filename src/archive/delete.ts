import { faultPoint } from "../lib/faults";
import type { SegmentRecord } from "./segments";

/** Rows of each kind one D1 batch deletes: a batch stays well inside D1's per-query limits. */
export const DELETE_BATCH = 200;

/**
 * The audit row types found by charge or by reference after archiving: what a receipt or an evidence
 * file looks up, and manual credits, whose transfer id is refused a second time (movements.ts).
 */
const RECEIPT_ROW_TYPES = "('charge.paid', 'payout.paid', 'charge.refunded', 'agent.credited')";

/**
 * Deletes a verified segment's rows from D1, a bounded batch at a time, until none is left or the
 * deadline passes; true when none is left. Each batch is one D1 transaction that adds the deleted
 * ledger entries to their accounts' carried totals (archived_balances), notes where archived
 * receipt rows are (archived_audit_refs), and deletes the same rows: its subqueries pick the same
 * lowest ids twice inside it. A crash between batches leaves whole batches done, and the next run
 * goes on with what is left.
 */
export async function deleteArchivedRows(
  d1: D1Database,
  s: SegmentRecord,
  deadline: number,
  batchSize = DELETE_BATCH,
): Promise<boolean> {
  const limit = Math.max(1, Math.trunc(batchSize));
  const entryIds = `SELECT id FROM ledger_entries WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ${limit}`;
  const auditSeqs = `SELECT seq FROM audit_events WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq LIMIT ${limit}`;
  const batch = () =>
    d1.batch([
      d1
        .prepare(
          `INSERT INTO archived_balances (account, carried_minor, entries)
           SELECT account, SUM(amount_minor), COUNT(*) FROM ledger_entries WHERE id IN (${entryIds}) GROUP BY account
           ON CONFLICT (account) DO UPDATE SET carried_minor = carried_minor + excluded.carried_minor,
             entries = entries + excluded.entries`,
        )
        .bind(s.afterEntryId, s.lastEntryId),
      d1.prepare(`DELETE FROM ledger_entries WHERE id IN (${entryIds})`).bind(s.afterEntryId, s.lastEntryId),
      d1
        .prepare(
          `INSERT OR IGNORE INTO archived_audit_refs (seq, type, charge_id, reference)
           SELECT seq, type, charge_id, reference FROM audit_events
           WHERE seq IN (${auditSeqs}) AND type IN ${RECEIPT_ROW_TYPES}`,
        )
        .bind(s.firstSeq, s.lastSeq),
      d1.prepare(`DELETE FROM audit_events WHERE seq IN (${auditSeqs})`).bind(s.firstSeq, s.lastSeq),
    ]);
  for (;;) {
    const results = await batch();
    const deleted = (results[1]?.meta.changes ?? 0) + (results[3]?.meta.changes ?? 0);
    if (deleted === 0) return true;
    faultPoint("archive.during_delete");
    if (Date.now() >= deadline) return false;
  }
}
