import type { Env } from "../config/env";
import { settingsOf } from "../config/settings";
import { dbOfShard } from "../db/shards";
import type { OwnerKind } from "./directory";
import { type Place, placeAt } from "./place";

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

export async function writeHomeRow(kind: OwnerKind, place: Place, row: HomeRow): Promise<void> {
  if (place.isControl) return;
  const home = place.db;
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
  await writeHomeRow(kind, placeAt(env, shard), control);
}

/** What of an owner's account its home row decides: its money and, for an agent, its freeze and policy. */
interface HomeFields {
  balanceMinor: number;
  /** The exact balance in base units, as a decimal string (it can pass 2^53). */
  balanceBaseUnits: string;
  frozenAt?: string | null;
  frozenReason?: string | null;
  /** The policy as stored (canonical JSON): the one payments decide on. */
  policy?: string;
}

/** An account row's balance, in cents and exactly (a decimal string: it can pass 2^53), named as HomeFields names them. */
export const BALANCE_COLUMNS = "balance_minor AS balanceMinor, CAST(balance_base_units AS TEXT) AS balanceBaseUnits";

/** D1 binds at most 100 parameters a statement. */
const IDS_PER_READ = 90;

/**
 * Control rows with their money (and an agent's freeze and policy) read from their home shard, for views that
 * list owners: one directory read, then one read per shard for the owners living there. A shard-0
 * owner's control row is its home row already, and with one shard nothing is read.
 */
export async function withHomeFields<T extends { id: string } & HomeFields>(
  env: Env,
  kind: OwnerKind,
  rows: T[],
): Promise<T[]> {
  if (settingsOf(env).ledgerShards === 1 || rows.length === 0) return rows;
  const table = kind === "merchant" ? "merchants" : "agents";
  const columns =
    kind === "merchant"
      ? `id, ${BALANCE_COLUMNS}`
      : `id, ${BALANCE_COLUMNS}, frozen_at AS frozenAt, frozen_reason AS frozenReason, policy`;
  const home = new Map<string, HomeFields>();
  for (let i = 0; i < rows.length; i += IDS_PER_READ) {
    const ids = rows.slice(i, i + IDS_PER_READ).map((r) => r.id);
    const marks = ids.map(() => "?").join(", ");
    const { results: placed } = await env.DB.prepare(
      `SELECT owner_id AS id, shard FROM shard_directory WHERE owner_kind = ? AND shard <> 0 AND owner_id IN (${marks})`,
    )
      .bind(kind, ...ids)
      .all<{ id: string; shard: number }>();
    const byShard = new Map<number, string[]>();
    for (const p of placed) byShard.set(p.shard, [...(byShard.get(p.shard) ?? []), p.id]);
    await Promise.all(
      [...byShard].map(async ([shard, owners]) => {
        const { results } = await dbOfShard(env, shard)
          .prepare(`SELECT ${columns} FROM ${table} WHERE id IN (${owners.map(() => "?").join(", ")})`)
          .bind(...owners)
          .all<HomeFields & { id: string }>();
        for (const { id, ...fields } of results) home.set(id, fields);
      }),
    );
  }
  return rows.map((row) => {
    const fields = home.get(row.id);
    return fields ? { ...row, ...fields } : row;
  });
}
