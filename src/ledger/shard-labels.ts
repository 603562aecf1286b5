import type { Place } from "./place";

/*
 * A ledger shard's number where it is shown: to a person (logs, the console), in the API (`?shard=k`,
 * the shards an audit verifier walks) and in what a shard signs and stores (checkpoints and their
 * anchors, evidence, archive keys). Shard 0, the one there always was, is named by none of these
 * formats, so what was written before shards reads as it always did. Domains hold places: they take
 * a number from here to show it, and leave reasoning about it to the ledger. Nothing here runs only
 * in a Worker: the CLI's offline verifiers name shards with it too.
 */

/** The number a place is shown by. */
export const shardLabel = (at: Place): number => at.shard;

/** The `shard` field naming a place in an answer that lists every shard, shard 0 included. */
export const shardEntry = (at: Place): { shard: number } => ({ shard: at.shard });

/** The `shard` field of what shard `shard` signs, stores, logs or answers: none for shard 0. */
export const shardField = (shard: number): { shard?: number } => (shard === 0 ? {} : { shard });

/** Whether a format names shard `shard`: every shard's but shard 0's do. */
export const namesShard = (shard: number): boolean => shard !== 0;

/** Whether a format's `shard` field (absent: shard 0) names shard `shard`. */
export const fieldNamesShard = (field: unknown, shard: number): boolean => (field ?? 0) === shard;
