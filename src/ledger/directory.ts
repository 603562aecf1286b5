import type { Env } from "../config/env";
import { settingsOf } from "../config/settings";
import { dbOfShard, shardNumbers } from "../db/shards";
import { type SqlStatement, sqlStatement } from "../db/statements";
import { IsolateCache } from "../lib/isolate-cache";

export type OwnerKind = "merchant" | "agent";

/** The shard a new merchant or agent goes to (LEDGER_SHARD_PLACEMENT). */
export function placeShard(env: Env): number {
  const placement = settingsOf(env).shardPlacement;
  if (placement.kind === "fixed") return placement.shard;
  const shards = shardNumbers(env, settingsOf(env).ledgerShards);
  return shards[crypto.getRandomValues(new Uint32Array(1))[0]! % shards.length]!;
}

/** The directory row of a new owner, written in the batch that creates it: its shard from then on. */
export const directoryEntry = (kind: OwnerKind, ownerId: string, home: { shard: number }, at: string): SqlStatement =>
  sqlStatement(
    "INSERT INTO shard_directory (owner_kind, owner_id, shard, assigned_at) VALUES (?, ?, ?, ?)",
    kind,
    ownerId,
    home.shard,
    at,
  );

/** The directory has no row for the owner: it does not exist (or its creation did not commit). */
export class UnknownOwner extends Error {}

// Directory rows never change (the table refuses it), so one read per owner and isolate is enough.
const homes = new IsolateCache<string, number>(100_000);

/**
 * The shard an owner lives in, from the directory. An owner without a row is an error, never
 * "shard 0 by default": guessing would put its money in a database its history is not in.
 */
export async function homeShard(env: Env, kind: OwnerKind, ownerId: string): Promise<number> {
  const key = `${kind}:${ownerId}`;
  const known = homes.get(key);
  if (known !== undefined) return known;
  const row = await env.DB.prepare("SELECT shard FROM shard_directory WHERE owner_kind = ? AND owner_id = ?")
    .bind(kind, ownerId)
    .first<{ shard: number }>();
  if (!row) throw new UnknownOwner(`${kind} ${ownerId} has no shard in the directory`);
  if (row.shard >= settingsOf(env).ledgerShards)
    throw new Error(`${kind} ${ownerId} lives in shard ${row.shard}, beyond LEDGER_SHARDS`);
  homes.set(key, row.shard);
  return row.shard;
}

/**
 * The owner's home shard, without reading the directory while this deployment runs one shard (then
 * every owner lives in shard 0, whatever the directory says or lacks), so one shard behaves as before.
 */
export async function ownerShard(env: Env, kind: OwnerKind, ownerId: string): Promise<number> {
  return settingsOf(env).ledgerShards === 1 ? 0 : homeShard(env, kind, ownerId);
}

/** The owner's home shard, or null for an owner the directory does not know (it does not exist). */
export async function knownOwnerShard(env: Env, kind: OwnerKind, ownerId: string): Promise<number | null> {
  try {
    return await ownerShard(env, kind, ownerId);
  } catch (error) {
    if (error instanceof UnknownOwner) return null;
    throw error;
  }
}

/**
 * The database an Idempotency-Key of a request acting on this owner's money is reserved in: its home
 * shard's, where the plan that stores the answer commits. An owner the directory does not know
 * reserves in control; its request finds no owner and answers 404.
 */
export async function keysInHomeOf(env: Env, kind: OwnerKind, ownerId: string): Promise<D1Database> {
  if (settingsOf(env).ledgerShards === 1) return env.DB;
  try {
    return dbOfShard(env, await homeShard(env, kind, ownerId));
  } catch (error) {
    // Only an unknown owner: a failed directory read must not reserve the key where the answer is not stored.
    if (error instanceof UnknownOwner) return env.DB;
    throw error;
  }
}
