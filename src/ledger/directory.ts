import type { Env } from "../config/env";
import { settingsOf } from "../config/settings";
import { shardNumbers } from "../db/shards";
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
