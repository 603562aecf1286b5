import { type GuardCheck, type SqlStatement, sqlStatement } from "./statements";

/*
 * The API keys of merchants and agents, kept (as SHA-256 hashes) in their identity rows in control:
 * the credential lookup of every request (auth/credentials.ts) and the key roll (keys/roll.ts). Both
 * folders sit below merchants/ and agents/ (which import them), so the statements stay here, beside
 * the tables' schema.
 */

/** Whose API key: a merchant's (`sk_mch_`) or an agent's (`svc_sk_`). */
export type KeyHolderKind = "merchant" | "agent";

const TABLE = { agent: "agents", merchant: "merchants" } as const;

/** A key holder's current key and the one before it, with the end of that one's grace. */
export interface KeyHolderRow {
  id: string;
  hash: string;
  previousHash: string | null;
  previousUntil: string | null;
}

/** The holder whose current or previous key has this hash, or null for none. */
export async function keyHolderByHash(
  control: D1Database,
  kind: KeyHolderKind,
  hash: string,
): Promise<KeyHolderRow | null> {
  return control
    .prepare(
      `SELECT id, api_key_hash AS hash, previous_api_key_hash AS previousHash, previous_key_expires_at AS previousUntil
       FROM ${TABLE[kind]} WHERE api_key_hash = ?1 OR previous_api_key_hash = ?1`,
    )
    .bind(hash)
    .first<KeyHolderRow>();
}

/**
 * What a key roll checks in its batch: the holder exists (`<kind>_not_found`), and no holder has the new
 * key yet (`key_already_rolled`: applied twice, after a lost answer, the second would make the new key
 * its own predecessor and end the old one's grace).
 */
export const keyRollChecks = (kind: KeyHolderKind, id: string, newHash: string): GuardCheck[] => [
  [`${kind}_not_found`, `EXISTS (SELECT 1 FROM ${TABLE[kind]} WHERE id = ?)`, id],
  ["key_already_rolled", `NOT EXISTS (SELECT 1 FROM ${TABLE[kind]} WHERE api_key_hash = ?)`, newHash],
];

/** The new key becomes the holder's; the one it replaces works until `previousKeyExpiresAt`. */
export const keyRollUpdate = (
  kind: KeyHolderKind,
  id: string,
  newHash: string,
  previousKeyExpiresAt: string,
): SqlStatement =>
  sqlStatement(
    `UPDATE ${TABLE[kind]} SET previous_api_key_hash = api_key_hash, previous_key_expires_at = ?, api_key_hash = ? WHERE id = ?`,
    previousKeyExpiresAt,
    newHash,
    id,
  );
