import { dbOfShard } from "../db/shards";
import type { Env } from "../env";
import { shardOfId } from "../lib/ids";
import { settingsOf } from "../settings";

/** The ledger shards this deployment runs, 0 … LEDGER_SHARDS − 1; every one must have its binding. */
export function shardsOf(env: Env): number[] {
  const shards = Array.from({ length: settingsOf(env).ledgerShards }, (_, k) => k);
  for (const k of shards) dbOfShard(env, k);
  return shards;
}

/** Runs `fn` on every shard's database at once, answers in shard order. */
export const forEachShard = <T>(env: Env, fn: (db: D1Database, shard: number) => Promise<T>): Promise<T[]> =>
  Promise.all(shardsOf(env).map((k) => fn(dbOfShard(env, k), k)));

/**
 * The database of the shard an id names, or null when this deployment does not run that shard: an
 * id tagged with another shard names no object here (a 404, never a missing binding's 500).
 */
export function dbOfIdOrNull(env: Env, id: string): D1Database | null {
  const shard = shardOfId(id);
  return shard < settingsOf(env).ledgerShards ? dbOfShard(env, shard) : null;
}
