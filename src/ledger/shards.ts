import type { Env } from "../config/env";
import { settingsOf } from "../config/settings";
import { dbOfShard, shardNumbers, shardOfId } from "../db/shards";

/** Runs `fn` on every shard's database at once, answers in shard order. */
export const forEachShard = <T>(env: Env, fn: (db: D1Database, shard: number) => Promise<T>): Promise<T[]> =>
  Promise.all(shardNumbers(env, settingsOf(env).ledgerShards).map((k) => fn(dbOfShard(env, k), k)));

/**
 * The database of the shard an id names, or null when this deployment does not run that shard: an
 * id tagged with another shard names no object here (a 404, never a missing binding's 500).
 */
export function dbOfIdOrNull(env: Env, id: string): D1Database | null {
  const shard = shardOfId(id);
  return shard < settingsOf(env).ledgerShards ? dbOfShard(env, shard) : null;
}
