/**
 * The ledger's databases. Shard 0 is `DB`, which is also the control database (identities, keys,
 * the shard directory, webhooks, console state); shard k ≥ 1 is the D1 binding `DB_SHARD_<k>`.
 * Every shard runs the same migrations; the tables a shard does not use stay empty.
 */
export interface ShardBindings {
  DB: D1Database;
}

/** The database of shard `k`; a shard without its binding is a configuration error, never shard 0. */
export function dbOfShard(env: ShardBindings, shard: number): D1Database {
  if (shard === 0) return env.DB;
  const db = (env as unknown as Record<string, D1Database | undefined>)[`DB_SHARD_${shard}`];
  if (!db) throw new Error(`ledger shard ${shard} has no D1 binding DB_SHARD_${shard}`);
  return db;
}

/**
 * The ledger shards this deployment runs, 0 … count − 1, each checked to have its binding; `count` is
 * the LEDGER_SHARDS setting (src/db cannot read the settings itself).
 */
export function shardNumbers(env: ShardBindings, count: number): number[] {
  const shards = Array.from({ length: count }, (_, k) => k);
  for (const k of shards) dbOfShard(env, k);
  return shards;
}

const SHARD_TAG = /_[sS](\d{1,3})_[0-9A-Za-z]{24}$/;

/** The ledger shard an id (lib/ids.ts `newId` tags it)'s object lives in: its tag, or 0 for an untagged id (every id before shards). */
export function shardOfId(id: string): number {
  const tag = SHARD_TAG.exec(id);
  return tag ? Number(tag[1]) : 0;
}
