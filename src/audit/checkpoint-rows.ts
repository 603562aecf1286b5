import { nowIso } from "../lib/time";
import type { OnChainAnchor } from "./anchor-abi";

/*
 * The statements of audit_checkpoints: the checkpoints src/checkpoints signs and anchors, read here
 * and by receipts, the archive and the routes. The anchor's states (`pending`, `sent`, `confirmed`,
 * `failed`) change only through the guarded updates below: each lands for one worker, or for none.
 * (./stored-checkpoints.ts reads the same rows to check them against the chain.)
 */

export interface Checkpoint {
  seq: number;
  hash: string;
  fromSeq: number;
  rowsRoot: string;
  signedAt: string;
  kid: string;
  jws: string;
  /** `pending` (not on chain yet), `sent`, `confirmed`, or `failed` (to be sent again). */
  anchorStatus: "pending" | "sent" | "confirmed" | "failed";
  anchorFrom: `0x${string}` | null;
  txHash: `0x${string}` | null;
  blockNumber: number | null;
  broadcastAt: string | null;
  /** The chain's head when the anchor was first handed over: where a search for it starts (a little before). */
  sentBlock: number | null;
  anchoredAt: string | null;
  updatedAt: string;
}

const CHECKPOINT_SELECT = `SELECT seq, hash, from_seq AS fromSeq, rows_root AS rowsRoot, signed_at AS signedAt,
  kid, jws, anchor_status AS anchorStatus, anchor_from AS anchorFrom, tx_hash AS txHash,
  block_number AS blockNumber, broadcast_at AS broadcastAt, sent_block AS sentBlock, anchored_at AS anchoredAt, updated_at AS updatedAt
  FROM audit_checkpoints`;

export const checkpointAt = (db: D1Database, seq: number) =>
  db.prepare(`${CHECKPOINT_SELECT} WHERE seq = ?`).bind(seq).first<Checkpoint>();

/** The first checkpoint whose rows include `seq`. */
export const checkpointCovering = (db: D1Database, seq: number) =>
  db
    .prepare(`${CHECKPOINT_SELECT} WHERE seq >= ? AND from_seq <= ? ORDER BY seq LIMIT 1`)
    .bind(seq, seq)
    .first<Checkpoint>();

export const latestCheckpoint = (db: D1Database) =>
  db.prepare(`${CHECKPOINT_SELECT} ORDER BY seq DESC LIMIT 1`).first<Checkpoint>();

/** Checkpoints after `afterSeq`, oldest first. */
export async function checkpointPage(db: D1Database, afterSeq: number, limit: number): Promise<Checkpoint[]> {
  const rows = await db
    .prepare(`${CHECKPOINT_SELECT} WHERE seq > ? ORDER BY seq LIMIT ?`)
    .bind(afterSeq, limit)
    .all<Checkpoint>();
  return rows.results;
}

/** The checkpoints not yet confirmed on chain, oldest first. */
export async function unanchoredCheckpoints(db: D1Database, limit: number): Promise<Checkpoint[]> {
  const rows = await db
    .prepare(`${CHECKPOINT_SELECT} WHERE anchor_status != 'confirmed' ORDER BY seq LIMIT ?`)
    .bind(limit)
    .all<Checkpoint>();
  return rows.results;
}

/**
 * Stores a signed checkpoint, `pending` on chain; true when this call stored it. It lands only while
 * no checkpoint reaches `fromSeq` (the one it was built on is still the latest), and the seq is the
 * primary key: of two callers at once, one inserts.
 */
export async function insertCheckpoint(
  db: D1Database,
  cp: Pick<Checkpoint, "seq" | "hash" | "fromSeq" | "rowsRoot" | "signedAt" | "kid" | "jws">,
): Promise<boolean> {
  const inserted = await db
    .prepare(
      `INSERT OR IGNORE INTO audit_checkpoints
         (seq, hash, from_seq, rows_root, signed_at, kid, jws, anchor_status, created_at, updated_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM audit_checkpoints WHERE seq >= ?)`,
    )
    .bind(cp.seq, cp.hash, cp.fromSeq, cp.rowsRoot, cp.signedAt, cp.kid, cp.jws, cp.signedAt, cp.signedAt, cp.fromSeq)
    .run();
  return inserted.meta.changes === 1;
}

async function changed(db: D1Database, sql: string, ...params: unknown[]): Promise<boolean> {
  return (
    (
      await db
        .prepare(sql)
        .bind(...params)
        .run()
    ).meta.changes === 1
  );
}

/**
 * The first hand-over of an anchor to gas lane `lane` (or one after a failure), with the head it was
 * prepared at (the first one is kept: no anchor of it can be older); only one worker's mark lands.
 */
export const markAnchorHandedOver = (db: D1Database, cp: Checkpoint, lane: string, now: number, block: number | null) =>
  changed(
    db,
    `UPDATE audit_checkpoints SET anchor_status = 'pending', broadcast_at = ?, anchor_from = ?, tx_hash = NULL,
       sent_block = COALESCE(sent_block, ?), updated_at = ?
     WHERE seq = ? AND ((anchor_status = 'pending' AND broadcast_at IS NULL) OR (anchor_status = 'failed' AND updated_at = ?))`,
    nowIso(now),
    lane,
    block,
    nowIso(now),
    cp.seq,
    cp.updatedAt,
  );

/** A resend's turn, after the chain showed no anchor: the row unchanged since this worker read it. */
export const claimAnchorResend = (db: D1Database, cp: Checkpoint, now: number) =>
  changed(
    db,
    `UPDATE audit_checkpoints SET anchor_status = 'pending', broadcast_at = ?, tx_hash = NULL, updated_at = ?
     WHERE seq = ? AND anchor_status IN ('pending', 'sent') AND updated_at = ?`,
    nowIso(now),
    nowIso(now),
    cp.seq,
    cp.updatedAt,
  );

/** The anchor's transaction, once its lane has sent it. */
export const recordAnchorSent = (db: D1Database, cp: Checkpoint, transaction: `0x${string}`, now: number) =>
  changed(
    db,
    "UPDATE audit_checkpoints SET anchor_status = 'sent', tx_hash = ?, updated_at = ? WHERE seq = ? AND anchor_status = 'pending'",
    transaction,
    nowIso(now),
    cp.seq,
  );

/** The anchor did not land (rejected or reverted): it is sent again. */
export const markAnchorFailed = (db: D1Database, cp: Checkpoint, now: number) =>
  changed(
    db,
    "UPDATE audit_checkpoints SET anchor_status = 'failed', updated_at = ? WHERE seq = ? AND anchor_status IN ('pending', 'sent')",
    nowIso(now),
    cp.seq,
  );

/** The anchor found on chain: its transaction, block and sender; a confirmed checkpoint stays as it was. */
export const confirmAnchor = (
  db: D1Database,
  cp: Checkpoint,
  anchor: Pick<OnChainAnchor, "transaction" | "blockNumber" | "by">,
  now: number,
) =>
  changed(
    db,
    `UPDATE audit_checkpoints SET anchor_status = 'confirmed', tx_hash = ?, block_number = ?, anchor_from = ?,
       anchored_at = ?, updated_at = ? WHERE seq = ? AND anchor_status != 'confirmed'`,
    anchor.transaction,
    anchor.blockNumber,
    anchor.by,
    nowIso(now),
    nowIso(now),
    cp.seq,
  );
