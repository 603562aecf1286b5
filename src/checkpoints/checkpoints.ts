import { type Checkpoint, checkpointAt, insertCheckpoint, latestCheckpoint } from "../audit/checkpoint-rows";
import { CHECKPOINT_TYP } from "../audit/checkpoints-verify";
import { merkleRoot } from "../audit/merkle";
import { auditHeadSeq, rowHashes } from "../audit/service";
import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { shardField } from "../ledger/shard-labels";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";
import { signingKid, signJws } from "../proofs/keys";

/*
 * Signed checkpoints of the audit chain. Each covers the rows after the checkpoint before it up to
 * the head it signs (`fromSeq`..`seq`): `hash` is the head row's hash, `rowsRoot` the Merkle root
 * of the covered rows' hashes (src/audit/merkle.ts). The anchoring on chain is ./anchoring.ts.
 * A folder apart from src/audit: anchoring sends through the x402 lanes, and what src/x402 uses
 * (the ledger) appends audit rows. The rows, of the chain and of its checkpoints, are read and
 * written through src/audit's statements (./service.ts, ./checkpoint-rows.ts there): its tables.
 */

export { CHECKPOINT_TYP };

/** The most rows one checkpoint covers: a long chain's first checkpoints are made a bounded piece at a time. */
export const MAX_ROWS_PER_CHECKPOINT = 20_000;

/**
 * One checkpoint's worst case in D1: the last checkpoint and the head (2), its rows' hashes a page of
 * 1,000 at a time, its insert and its read back (2). Rows already archived are read from R2 instead.
 */
const CHECKPOINT_COST = { d1Queries: 4 + Math.ceil(MAX_ROWS_PER_CHECKPOINT / 1000), subrequests: 2 } as const;

/** How many checkpoints one call makes at most while catching up with the head. */
const MAX_CHECKPOINTS_PER_CALL = 5;

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
    // What is left is made by the next call: each checkpoint starts where the last one ended.
    if (!roomFor(CHECKPOINT_COST, "audit_checkpoint", shardField(at.shard))) break;
    const [last, head] = await Promise.all([latestCheckpoint(db), auditHeadSeq(db)]);
    if (head === null) return { kind: "empty" };
    if (last && last.seq >= head)
      return created ? { kind: "created", checkpoint: created } : { kind: "unchanged", checkpoint: last };
    const fromSeq = (last?.seq ?? 0) + 1;
    const seq = Math.min(head, fromSeq + MAX_ROWS_PER_CHECKPOINT - 1);
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
    const kid = await signingKid(proofs);
    if (await insertCheckpoint(db, { seq, hash, fromSeq, rowsRoot, signedAt, kid, jws }))
      created = await checkpointAt(db, seq);
  }
  const latest = await latestCheckpoint(db);
  if (created) return { kind: "created", checkpoint: created };
  return latest ? { kind: "unchanged", checkpoint: latest } : { kind: "empty" };
}
