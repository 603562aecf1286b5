import type { SegmentRecord } from "../audit/archiving";
import { archiveAuditPage } from "../audit/archiving";
import { executeBatch } from "../db/statements";
import { archiveEntryPage } from "../ledger/archiving";
import { faultPoint } from "../lib/faults";
import { currentInvocation } from "../lib/invocation";

/** Rows of each kind one D1 batch deletes: a batch stays well inside D1's per-query limits. */
export const DELETE_BATCH = 200;

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
  const [carry, removeEntries] = archiveEntryPage(s.afterEntryId, s.lastEntryId, limit);
  const [refer, removeRows] = archiveAuditPage(s.firstSeq, s.lastSeq, limit);
  for (;;) {
    const results = await executeBatch(d1, [carry, removeEntries, refer, removeRows]);
    const deleted = (results[1]?.meta.changes ?? 0) + (results[3]?.meta.changes ?? 0);
    if (deleted === 0) return true;
    faultPoint("archive.during_delete");
    // A batch is 4 statements: the next waits for the next run when the invocation has no room for it.
    if (Date.now() >= deadline || !currentInvocation().left({ d1Queries: 4 })) return false;
  }
}
