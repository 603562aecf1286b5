import { type SqlStatement, sqlStatement } from "../db/statements";
import type { AuditRow } from "../ledger/chain";
import { AUDIT_COLUMNS, type AuditRecord, auditRowOf } from "./service";

/*
 * The audit chain's side of archiving history (src/archive/ runs it): the segments recorded in D1
 * (archive_segments) and the steps they go through, the rows a segment takes, and the batch
 * statements that delete them while noting where archived receipt rows are (archived_audit_refs).
 * Readers of the history are ./archived.ts.
 */

/** A segment as recorded in D1 (archive_segments). */
export interface SegmentRecord {
  firstSeq: number;
  lastSeq: number;
  prevHash: string;
  lastHash: string;
  afterEntryId: number;
  lastEntryId: number;
  rows: number;
  entries: number;
  minCreatedAt: string;
  maxCreatedAt: string;
  objectKey: string;
  objectSha256: string | null;
  status: "planned" | "verified" | "done";
  archivedAt: string;
}

const SEGMENT_SELECT = `SELECT first_seq AS firstSeq, last_seq AS lastSeq, prev_hash AS prevHash, last_hash AS lastHash,
  after_entry_id AS afterEntryId, last_entry_id AS lastEntryId, rows, entries, min_created_at AS minCreatedAt,
  max_created_at AS maxCreatedAt, object_key AS objectKey, object_sha256 AS objectSha256, status, archived_at AS archivedAt
  FROM archive_segments`;

/** The oldest segment not yet done: at most one is, since a run finishes it before planning the next. */
export const unfinishedSegment = (d1: D1Database) =>
  d1.prepare(`${SEGMENT_SELECT} WHERE status != 'done' ORDER BY first_seq LIMIT 1`).first<SegmentRecord>();

/** The segment with the highest seqs, whatever its status: the next one links to it. */
export const lastSegment = (d1: D1Database) =>
  d1.prepare(`${SEGMENT_SELECT} ORDER BY first_seq DESC LIMIT 1`).first<SegmentRecord>();

export const segmentAt = (d1: D1Database, firstSeq: number) =>
  d1.prepare(`${SEGMENT_SELECT} WHERE first_seq = ?`).bind(firstSeq).first<SegmentRecord>();

/** Records a planned segment; a concurrent run that planned the same first seq first wins (same bounds or not). */
export async function recordPlan(d1: D1Database, s: Omit<SegmentRecord, "objectSha256" | "status">): Promise<void> {
  await d1
    .prepare(
      `INSERT OR IGNORE INTO archive_segments (first_seq, last_seq, prev_hash, last_hash, after_entry_id, last_entry_id,
         rows, entries, min_created_at, max_created_at, object_key, object_sha256, status, archived_at, updated_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 'planned', ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM archive_segments WHERE status != 'done' OR last_seq >= ?)`,
    )
    .bind(
      s.firstSeq,
      s.lastSeq,
      s.prevHash,
      s.lastHash,
      s.afterEntryId,
      s.lastEntryId,
      s.rows,
      s.entries,
      s.minCreatedAt,
      s.maxCreatedAt,
      s.objectKey,
      s.archivedAt,
      s.archivedAt,
      s.firstSeq,
    )
    .run();
}

export async function markSegment(
  d1: D1Database,
  firstSeq: number,
  from: SegmentRecord["status"],
  to: SegmentRecord["status"],
  updatedAt: string,
  objectSha256?: string,
): Promise<void> {
  await d1
    .prepare(
      `UPDATE archive_segments SET status = ?, object_sha256 = COALESCE(?, object_sha256), updated_at = ?
       WHERE first_seq = ? AND status = ?`,
    )
    .bind(to, objectSha256 ?? null, updatedAt, firstSeq, from)
    .run();
}

/** Audit rows `firstSeq`..`lastSeq` still in D1, in order. */
export async function liveAuditRows(d1: D1Database, firstSeq: number, lastSeq: number): Promise<AuditRow[]> {
  const { results } = await d1
    .prepare(`SELECT ${AUDIT_COLUMNS} FROM audit_events WHERE seq BETWEEN ? AND ? ORDER BY seq`)
    .bind(firstSeq, lastSeq)
    .all<AuditRecord>();
  return results.map(auditRowOf);
}

/**
 * The first row of `firstSeq`..`lastSeq` made at or after `cutoffIso`, or null when none is. Its
 * `created_at` is not monotonic in seq (plans are stamped before they queue); `+created_at` keeps
 * SQLite on the seq range, off the created_at index.
 */
export async function firstRowFrom(
  d1: D1Database,
  firstSeq: number,
  lastSeq: number,
  cutoffIso: string,
): Promise<number | null> {
  const young = await d1
    .prepare("SELECT MIN(seq) AS seq FROM audit_events WHERE seq BETWEEN ? AND ? AND +created_at >= ?")
    .bind(firstSeq, lastSeq, cutoffIso)
    .first<{ seq: number | null }>();
  return young?.seq ?? null;
}

/** When row `seq` was made, or null when D1 has no such row. */
export async function auditCreatedAt(d1: D1Database, seq: number): Promise<string | null> {
  const row = await d1
    .prepare("SELECT created_at AS createdAt FROM audit_events WHERE seq = ?")
    .bind(seq)
    .first<{ createdAt: string }>();
  return row?.createdAt ?? null;
}

/**
 * The audit row types found by charge or by reference after archiving: what a receipt or an evidence
 * file looks up, and manual credits, whose transfer id is refused a second time (src/ledger/movements.ts).
 */
const RECEIPT_ROW_TYPES =
  "('charge.paid', 'payout.paid', 'charge.refunded', 'agent.credited', 'agent.x402_payment.settled')";

/**
 * The statements of a delete batch that take the `limit` lowest rows of `firstSeq`..`lastSeq`:
 * `refer` notes where their receipt rows are, then `remove` deletes them (its changes are how many
 * went). Their subqueries pick the same seqs twice inside the one batch.
 */
export function archiveAuditPage(
  firstSeq: number,
  lastSeq: number,
  limit: number,
): [refer: SqlStatement, remove: SqlStatement] {
  const seqs = `SELECT seq FROM audit_events WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq LIMIT ${Math.trunc(limit)}`;
  return [
    sqlStatement(
      `INSERT OR IGNORE INTO archived_audit_refs (seq, type, charge_id, reference)
       SELECT seq, type, charge_id, reference FROM audit_events
       WHERE seq IN (${seqs}) AND type IN ${RECEIPT_ROW_TYPES}`,
      firstSeq,
      lastSeq,
    ),
    sqlStatement(`DELETE FROM audit_events WHERE seq IN (${seqs})`, firstSeq, lastSeq),
  ];
}
