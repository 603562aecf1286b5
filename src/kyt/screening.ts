import type { kytBlocklist } from "../db/schema";
import type { GuardCheck } from "../db/statements";
import { OFAC_SDN_ETH } from "./ofac-sdn-eth";

const BUILT_IN = new Set(OFAC_SDN_ETH);

export interface KytResult {
  verdict: "pass" | "block";
  reason: string;
}

export const EVM_ADDRESS = /^0x[a-fA-F0-9]{40}$/;

/**
 * Screens an address against the built-in OFAC SDN list and the operators'
 * blocklist. Matching ignores letter case. The same screening applies to
 * payout addresses, x402 payers and deposit senders.
 */
export async function screenAddress(d1: D1Database, address: string): Promise<KytResult> {
  // The built-in list needs no query.
  if (BUILT_IN.has(address.trim().toLowerCase())) return screened(address, false);
  return screened(address, (await blocklistStatement(d1, address).first()) !== null);
}

/** The blocklist lookup of `address` as one statement, for a caller that batches it with its own reads. */
export const blocklistStatement = (d1: D1Database, address: string) =>
  d1.prepare("SELECT 1 AS hit FROM kyt_blocklist WHERE address = ?").bind(address.trim().toLowerCase());

/**
 * `address` is not on the operators' blocklist, as a guard of a write that must not happen for one
 * (`reason` is the refusal's: a payer's by default): the list is read in the same transaction as the write.
 */
export const notOnBlocklist = (address: string, reason = "payer_blocked"): GuardCheck => [
  reason,
  "NOT EXISTS (SELECT 1 FROM kyt_blocklist WHERE address = ?)",
  address.trim().toLowerCase(),
];

/** The verdict, given whether the operators' blocklist has the address. */
export function screened(address: string, onBlocklist: boolean): KytResult {
  if (BUILT_IN.has(address.trim().toLowerCase())) return { verdict: "block", reason: "ofac_sdn_list" };
  if (onBlocklist) return { verdict: "block", reason: "operator_blocklist" };
  return { verdict: "pass", reason: "no_blocklist_hit" };
}

export type BlocklistEntry = typeof kytBlocklist.$inferSelect;

/** The operators' blocklist, newest first. */
export async function blocklistEntries(d1: D1Database, limit: number): Promise<BlocklistEntry[]> {
  const { results } = await d1
    .prepare(
      "SELECT address, reason, added_by AS addedBy, created_at AS createdAt FROM kyt_blocklist ORDER BY created_at DESC LIMIT ?",
    )
    .bind(limit)
    .all<BlocklistEntry>();
  return results;
}

/** Puts an address (lower case) on the operators' blocklist; one already there takes the new reason and adder. */
export const putOnBlocklist = (d1: D1Database, entry: BlocklistEntry) =>
  d1
    .prepare(
      `INSERT INTO kyt_blocklist (address, reason, added_by, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (address) DO UPDATE SET reason = excluded.reason, added_by = excluded.added_by`,
    )
    .bind(entry.address, entry.reason, entry.addedBy, entry.createdAt)
    .run();
