import { z } from "zod";
import { wholeNumberVar } from "../lib/settings";

/** The most ledger shards one deployment runs (each one a D1 binding, DB_SHARD_1 … DB_SHARD_<n-1>). */
export const MAX_LEDGER_SHARDS = 64;

/**
 * LEDGER_SHARDS: how many ledger databases this deployment runs (DB is shard 0). It only ever grows:
 * an owner placed on a shard stays there, so a count below a shard in use is refused where it is read.
 * LEDGER_SHARD_PLACEMENT: where new merchants and agents go: `spread` (each to a random shard) or
 * `fixed:<k>` (all to shard k, for draining new work away from a full database, and for tests).
 */
export const ledgerShape = {
  LEDGER_SHARDS: wholeNumberVar({ min: 1, max: MAX_LEDGER_SHARDS, fallback: 1 }),
  LEDGER_SHARD_PLACEMENT: z
    .string()
    .regex(/^(spread|fixed:\d{1,2})$/, "expected spread or fixed:<shard>")
    .default("spread"),
};

export type ShardPlacement = { kind: "spread" } | { kind: "fixed"; shard: number };

export interface LedgerSettings {
  ledgerShards: number;
  shardPlacement: ShardPlacement;
}

export function ledgerSettings(s: { LEDGER_SHARDS: number; LEDGER_SHARD_PLACEMENT: string }): LedgerSettings {
  const fixed = /^fixed:(\d+)$/.exec(s.LEDGER_SHARD_PLACEMENT);
  return {
    ledgerShards: s.LEDGER_SHARDS,
    shardPlacement: fixed ? { kind: "fixed", shard: Number(fixed[1]) } : { kind: "spread" },
  };
}

/** A fixed placement must name a shard this deployment runs. */
export function refineLedger(s: { LEDGER_SHARDS: number; LEDGER_SHARD_PLACEMENT: string }, ctx: z.RefinementCtx) {
  const fixed = /^fixed:(\d+)$/.exec(s.LEDGER_SHARD_PLACEMENT);
  if (fixed && Number(fixed[1]) >= s.LEDGER_SHARDS)
    ctx.addIssue({ code: "custom", message: `LEDGER_SHARD_PLACEMENT names shard ${fixed[1]} of ${s.LEDGER_SHARDS}` });
}
