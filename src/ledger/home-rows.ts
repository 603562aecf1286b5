import { dbOfShard } from "../db/shards";
import type { Env } from "../env";
import type { OwnerKind } from "./directory";

/**
 * An owner living in shard k ≥ 1 has an account row there too, with the same id: the row its money
 * moves in (`balance_minor`, which the ledger's postings update and CHECK keeps ≥ 0) and what its
 * batches guard on. Identity (keys, deposit address) stays in the control database only; the copy's
 * `api_key_hash` is a placeholder nobody reads, since keys are looked up in control. In shard 0 the
 * control row is the account row.
 *
 * It is written BEFORE the batch that creates the owner in control (with its directory row): a crash
 * between the two leaves at most an account row nothing points to, never an owner whose postings
 * would update no row. INSERT OR IGNORE, so writing it again changes nothing.
 */
export interface HomeRow {
  id: string;
  name: string;
  createdAt: string;
  /** Merchants only. */
  category?: string | null;
  /** Agents only: the policy as stored (canonical JSON). */
  policy?: string;
}

export async function writeHomeRow(env: Env, kind: OwnerKind, shard: number, row: HomeRow): Promise<void> {
  if (shard === 0) return;
  const home = dbOfShard(env, shard);
  const placeholder = `home-copy:${row.id}`;
  await (kind === "merchant"
    ? home
        .prepare(
          "INSERT OR IGNORE INTO merchants (id, name, category, api_key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(row.id, row.name, row.category ?? null, placeholder, row.createdAt)
    : home
        .prepare("INSERT OR IGNORE INTO agents (id, name, policy, api_key_hash, created_at) VALUES (?, ?, ?, ?, ?)")
        .bind(row.id, row.name, row.policy ?? "{}", placeholder, row.createdAt)
  ).run();
}

/** The account row in `shard` of an owner that exists in control (tests, and repairs by hand). */
export async function ensureHomeRow(env: Env, kind: OwnerKind, ownerId: string, shard: number): Promise<void> {
  if (shard === 0) return;
  const control = await env.DB.prepare(
    kind === "merchant"
      ? "SELECT id, name, category, created_at AS createdAt FROM merchants WHERE id = ?"
      : "SELECT id, name, policy, created_at AS createdAt FROM agents WHERE id = ?",
  )
    .bind(ownerId)
    .first<HomeRow>();
  if (!control) throw new Error(`${kind} ${ownerId} has no control row`);
  await writeHomeRow(env, kind, shard, control);
}
