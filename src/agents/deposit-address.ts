import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { placementOf } from "../ledger/place";
import { hdAddressAt } from "../lib/hd";

/** Deposit addresses are account 0 of the service's receiving key; charges and links receive on account 1. */
const DEPOSIT_ACCOUNT = 0;

/** The deposit address at `index` of the service's receiving key (BIP-44 path m/44'/60'/0'/0/index). */
export const depositAddressAt = (mnemonic: string, index: number): `0x${string}` =>
  hdAddressAt(mnemonic, DEPOSIT_ACCOUNT, index);

/**
 * The agent's deposit address, assigned on first use. The derivation index is
 * taken in one statement (D1 runs statements one at a time, and the column is
 * unique), so concurrent assignments always get distinct indexes; the address
 * is then derived from the stored index, so an interrupted assignment is
 * completed the next time rather than given a second index.
 */
export async function ensureDepositAddress(env: Env, agentId: string): Promise<string | null> {
  const mnemonic = settingsOf(env).x402?.receivingMnemonic;
  if (!mnemonic) return null;
  // Deposit indexes are allocated in control, with the agent's identity.
  const db = placementOf(env).control.db;
  const row = await db
    .prepare("SELECT deposit_index AS depositIndex, deposit_address AS address FROM agents WHERE id = ?")
    .bind(agentId)
    .first<{ depositIndex: number | null; address: string | null }>();
  if (!row) return null;
  if (row.address) return row.address;
  let index = row.depositIndex;
  if (index === null) {
    const assigned = await db
      .prepare(
        "UPDATE agents SET deposit_index = (SELECT COALESCE(MAX(deposit_index), -1) + 1 FROM agents) WHERE id = ? AND deposit_index IS NULL RETURNING deposit_index AS depositIndex",
      )
      .bind(agentId)
      .first<{ depositIndex: number }>();
    index =
      assigned?.depositIndex ??
      (await db
        .prepare("SELECT deposit_index AS depositIndex FROM agents WHERE id = ?")
        .bind(agentId)
        .first<{ depositIndex: number }>())!.depositIndex;
  }
  const address = depositAddressAt(mnemonic, index).toLowerCase();
  await db
    .prepare("UPDATE agents SET deposit_address = ? WHERE id = ? AND deposit_address IS NULL")
    .bind(address, agentId)
    .run();
  return address;
}

/**
 * The agent holding each of `addresses` (lowercase) as its deposit address, by address: the
 * recipients of the token's transfers the deposit watcher read, looked up by the unique index in one
 * statement (the addresses go as one JSON array, as depositKeysOf's ids do: D1 binds at most 100
 * values). Its cost follows the transfers read, not the number of agents.
 */
export async function agentsAtDepositAddresses(control: D1Database, addresses: readonly string[]) {
  const rows = await control
    .prepare(
      "SELECT id, deposit_address AS address FROM agents WHERE deposit_address IN (SELECT value FROM json_each(?))",
    )
    .bind(JSON.stringify([...new Set(addresses)]))
    .all<{ id: string; address: string }>();
  return new Map(rows.results.map((row) => [row.address, row.id]));
}

/**
 * The deposit address and its derivation index of each of `agentIds` that has both (the ids go as
 * one JSON array: D1 binds at most 100 values). What a sweep of a deposit signs with.
 */
export async function depositKeysOf(
  control: D1Database,
  agentIds: string[],
): Promise<{ id: string; address: string; idx: number }[]> {
  const rows = await control
    .prepare(
      `SELECT id, deposit_address AS address, deposit_index AS idx FROM agents
       WHERE id IN (SELECT value FROM json_each(?)) AND deposit_index IS NOT NULL AND deposit_address IS NOT NULL`,
    )
    .bind(JSON.stringify([...new Set(agentIds)]))
    .all<{ id: string; address: string; idx: number }>();
  return rows.results;
}

/**
 * True when the agent `agentId` holds the deposit address `address` with its derivation index (SQL
 * expressions): a deposit there is one its key can sweep. Agents' identities are in control only.
 */
export const holdsDepositAddress = (agentId: string, address: string) =>
  `EXISTS (SELECT 1 FROM agents a WHERE a.id = ${agentId} AND a.deposit_address = ${address} AND a.deposit_index IS NOT NULL)`;
