import type { ArchivedLedgerEntry } from "../audit/segment";
import type { AuditRow } from "../ledger/chain";
import { auditRowOf } from "../audit/service";
import type { auditEvents } from "../db/schema";

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
    .prepare(
      `SELECT seq, type, reference, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId,
         amount_minor AS amountMinor, currency, data, created_at AS createdAt, prev_hash AS prevHash, hash
       FROM audit_events WHERE seq BETWEEN ? AND ? ORDER BY seq`,
    )
    .bind(firstSeq, lastSeq)
    .all<typeof auditEvents.$inferSelect>();
  return results.map(auditRowOf);
}

/** Ledger entries with ids after `afterId` up to `lastId` still in D1, in id order. */
export async function liveLedgerEntries(
  d1: D1Database,
  afterId: number,
  lastId: number,
): Promise<ArchivedLedgerEntry[]> {
  const { results } = await d1
    .prepare(
      `SELECT id, transfer_id AS transferId, account, amount_minor AS amountMinor, created_at AS createdAt
       FROM ledger_entries WHERE id > ? AND id <= ? ORDER BY id`,
    )
    .bind(afterId, lastId)
    .all<ArchivedLedgerEntry>();
  return results;
}
