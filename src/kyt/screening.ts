import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { kytBlocklist } from "../db/schema";
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
export async function screenAddress(db: Db, address: string): Promise<KytResult> {
  const normalized = address.trim().toLowerCase();
  if (BUILT_IN.has(normalized)) return { verdict: "block", reason: "ofac_sdn_list" };
  const hit = await db.select({ reason: kytBlocklist.reason }).from(kytBlocklist).where(eq(kytBlocklist.address, normalized)).get();
  if (hit) return { verdict: "block", reason: "operator_blocklist" };
  return { verdict: "pass", reason: "no_blocklist_hit" };
}
