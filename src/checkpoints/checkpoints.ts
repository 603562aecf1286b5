import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { nowIso } from "../lib/time";
import { signingKid, signJws } from "../proofs/keys";
import { CHECKPOINT_TYP } from "../audit/checkpoints-verify";
import { merkleRoot } from "../audit/merkle";
import type { HistoryStore } from "../audit/archived";
import { auditRows } from "../audit/service";
import { type Place, placementOf } from "../ledger/place";
import { shardField } from "../ledger/shard-labels";

/*
 * Signed checkpoints of the audit chain. Each covers the rows after the checkpoint before it up to
 * the head it signs (`fromSeq`..`seq`): `hash` is the head row's hash, `rowsRoot` the Merkle root
 * of the covered rows' hashes (src/audit/merkle.ts). The anchoring on chain is ./anchoring.ts.
 * A folder apart from src/audit: anchoring sends through the x402 lanes, and what src/x402 uses
 * (the ledger) appends audit rows.
 */

export { CHECKPOINT_TYP };

/** The most rows one checkpoint covers: a long chain's first checkpoints are made a bounded piece at a time. */
export const MAX_ROWS_PER_CHECKPOINT = 20_000;

/** How many checkpoints one call makes at most while catching up with the head. */
const MAX_CHECKPOINTS_PER_CALL = 5;

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
  anchoredAt: string | null;
  updatedAt: string;
}

export const CHECKPOINT_SELECT = `SELECT seq, hash, from_seq AS fromSeq, rows_root AS rowsRoot, signed_at AS signedAt,
  kid, jws, anchor_status AS anchorStatus, anchor_from AS anchorFrom, tx_hash AS txHash,
  block_number AS blockNumber, broadcast_at AS broadcastAt, anchored_at AS anchoredAt, updated_at AS updatedAt
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
 * The hashes of rows `fromSeq`..`toSeq`, in order; throws on a missing row. Rows still in D1, as
 * every new checkpoint's are, are read as their seq and hash alone; an older checkpoint's rows that
 * were archived are read through the whole history, segments included.
 */
export async function rowHashes(store: HistoryStore, fromSeq: number, toSeq: number): Promise<string[]> {
  const hashes = (await liveRowHashes(store.DB, fromSeq, toSeq)) ?? (await historyRowHashes(store, fromSeq, toSeq));
  if (hashes.length !== toSeq - fromSeq + 1) throw new Error(`audit chain has no row ${fromSeq + hashes.length}`);
  return hashes;
}

/** From D1 a page at a time; null when a row is not there (archived, or missing: the history tells). */
async function liveRowHashes(db: D1Database, fromSeq: number, toSeq: number): Promise<string[] | null> {
  const hashes: string[] = [];
  for (let from = fromSeq; from <= toSeq; from += 1000) {
    const page = await db
      .prepare("SELECT seq, hash FROM audit_events WHERE seq BETWEEN ? AND ? ORDER BY seq")
      .bind(from, Math.min(toSeq, from + 999))
      .all<{ seq: number; hash: string }>();
    for (const row of page.results) {
      if (row.seq !== fromSeq + hashes.length) return null;
      hashes.push(row.hash);
    }
  }
  return hashes.length === toSeq - fromSeq + 1 ? hashes : null;
}

async function historyRowHashes(store: HistoryStore, fromSeq: number, toSeq: number): Promise<string[]> {
  const hashes: string[] = [];
  for await (const row of auditRows(store, { afterSeq: fromSeq - 1, pageSize: 1000 })) {
    if (row.seq > toSeq || row.seq !== fromSeq + hashes.length) break;
    hashes.push(row.hash);
  }
  return hashes;
}

/**
 * What a checkpoint's JWS signs. Shard 0's payload is the one it always was, field for field; another
 * shard's names its shard, so a signature over one shard's head can never be shown for another's.
 */
export function checkpointPayload(
  shard: number,
  fields: { seq: number; hash: string; fromSeq: number; rowsRoot: string; signedAt: string },
): Record<string, unknown> {
  return { ...fields, ...shardField(shard) };
}

export type MadeCheckpoint =
  /** This call signed the checkpoint (and perhaps others before it, catching up). */
  | { kind: "created"; checkpoint: Checkpoint }
  /** The head has not moved since the latest checkpoint (or another caller signed it just now). */
  | { kind: "unchanged"; checkpoint: Checkpoint }
  | { kind: "empty" };

/**
 * Signs checkpoints up to the head of the audit chain of `at` (control's unless named), in its
 * database. Two callers at once never both insert: the insert lands only while no checkpoint reaches
 * `fromSeq` (the one this caller built on is still the latest), and the seq is the primary key; the
 * loser reads back what the winner signed.
 */
export async function makeCheckpoint(
  env: Env,
  now = Date.now(),
  at: Place = placementOf(env).control,
): Promise<MadeCheckpoint> {
  const proofs = settingsOf(env).proofs;
  const db = at.db;
  let created: Checkpoint | null = null;
  for (let made = 0; made < MAX_CHECKPOINTS_PER_CALL; made++) {
    const [last, head] = await Promise.all([
      latestCheckpoint(db),
      db.prepare("SELECT seq FROM audit_events ORDER BY seq DESC LIMIT 1").first<{ seq: number }>(),
    ]);
    if (!head) return { kind: "empty" };
    if (last && last.seq >= head.seq)
      return created ? { kind: "created", checkpoint: created } : { kind: "unchanged", checkpoint: last };
    const fromSeq = (last?.seq ?? 0) + 1;
    const seq = Math.min(head.seq, fromSeq + MAX_ROWS_PER_CHECKPOINT - 1);
    const hashes = await rowHashes({ DB: db, ARCHIVE: env.ARCHIVE }, fromSeq, seq);
    const hash = hashes[hashes.length - 1]!;
    const rowsRoot = merkleRoot(hashes);
    const signedAt = nowIso(now);
    const jws = await signJws(
      proofs,
      CHECKPOINT_TYP,
      // The payload signs the shard's number: a signature over one shard's head is never another's.
      checkpointPayload(at.shard, { seq, hash, fromSeq, rowsRoot, signedAt }),
    );
    const inserted = await db
      .prepare(
        `INSERT OR IGNORE INTO audit_checkpoints
         (seq, hash, from_seq, rows_root, signed_at, kid, jws, anchor_status, created_at, updated_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM audit_checkpoints WHERE seq >= ?)`,
      )
      .bind(seq, hash, fromSeq, rowsRoot, signedAt, await signingKid(proofs), jws, signedAt, signedAt, fromSeq)
      .run();
    if (inserted.meta.changes === 1) created = await checkpointAt(db, seq);
  }
  const latest = await latestCheckpoint(db);
  if (created) return { kind: "created", checkpoint: created };
  return latest ? { kind: "unchanged", checkpoint: latest } : { kind: "empty" };
}
