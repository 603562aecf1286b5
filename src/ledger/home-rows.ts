import { dbOfShard } from "../db/shards";
import type { Env } from "../env";
import type { OwnerKind } from "./directory";

/**
 * An owner living in shard k ≥ 1 has an account row there too, with the same id: the row its money
 * moves in (`balance_minor`, which the ledger's postings update and CHECK keeps ≥ 0) and what its
 * batches guard on. Identity (keys, deposit address) stays in the control database only; the copy's
 * `api_key_hash` is a placeholder nobody reads, since keys are looked up in control. In shard 0 the
 * control row is the account row. Written with INSERT OR IGNORE from the control row, so it is made
 * after the creation batch and again by any later use that finds it missing (a crash in between).
 */
export async function ensureHomeRow(env: Env, kind: OwnerKind, ownerId: string, shard: number): Promise<void> {
  if (shard === 0) return;
  const home = dbOfShard(env, shard);
  const control = await env.DB.prepare(
    kind === "merchant"
      ? "SELECT id, name, category, currency, created_at FROM merchants WHERE id = ?"
      : "SELECT id, name, policy, currency, created_at FROM agents WHERE id = ?",
  )
    .bind(ownerId)
    .first<Record<string, string | null>>();
  if (!control) throw new Error(`${kind} ${ownerId} has no control row`);
  const placeholder = `home-copy:${ownerId}`;
  await (kind === "merchant"
    ? home
        .prepare(
          "INSERT OR IGNORE INTO merchants (id, name, category, api_key_hash, currency, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(control.id, control.name, control.category, placeholder, control.currency, control.created_at)
    : home
        .prepare(
          "INSERT OR IGNORE INTO agents (id, name, policy, api_key_hash, currency, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(control.id, control.name, control.policy, placeholder, control.currency, control.created_at)
  ).run();
}
