import type { TreasuryStatus } from "./check";

/** A stored check as the API lists it: base units as decimal strings. */
export interface StoredCheck {
  at: string;
  asOfBlock: number;
  status: TreasuryStatus;
  differenceBaseUnits: string;
  totalBaseUnits: string;
  expectedBaseUnits: string;
}

const STORED_CHECK = `SELECT at, as_of_block AS asOfBlock, status, difference_base_units AS differenceBaseUnits,
  total_base_units AS totalBaseUnits, expected_base_units AS expectedBaseUnits FROM treasury_checks`;

/** The `limit` latest checks, newest first (by when they ran; the key breaks ties). */
export async function listChecks(db: D1Database, limit: number): Promise<StoredCheck[]> {
  const rows = await db.prepare(`${STORED_CHECK} ORDER BY at DESC, id DESC LIMIT ?`).bind(limit).all<StoredCheck>();
  return rows.results;
}

/** The latest check, or null before the first: one row read by the key, cheap enough for every console page. */
export const latestCheck = (db: D1Database) =>
  db.prepare(`${STORED_CHECK} ORDER BY id DESC LIMIT 1`).first<StoredCheck>();

/** A stored check with every figure it kept: what the console's treasury page shows. */
export interface CheckDetail extends StoredCheck {
  settlementBaseUnits: string;
  depositAddressesBaseUnits: string;
  onChainInMinor: number;
  onChainOutMinor: number;
  pendingOutMinor: number;
  inTransitMinor: number;
  addressesRead: number;
  /** The operator's float the check counted ("0" on checks from before fundings). */
  floatBaseUnits: string;
  /** The exact figures the cents above round down. */
  onChainInBaseUnits: string;
  onChainOutBaseUnits: string;
  pendingOutBaseUnits: string;
}

/** The `limit` latest checks with every figure, newest first. */
export async function listCheckDetails(db: D1Database, limit: number): Promise<CheckDetail[]> {
  const rows = await db
    .prepare(
      `SELECT at, as_of_block AS asOfBlock, status, difference_base_units AS differenceBaseUnits,
         total_base_units AS totalBaseUnits, expected_base_units AS expectedBaseUnits,
         settlement_base_units AS settlementBaseUnits, deposit_addresses_base_units AS depositAddressesBaseUnits,
         on_chain_in_minor AS onChainInMinor, on_chain_out_minor AS onChainOutMinor,
         pending_out_minor AS pendingOutMinor, in_transit_minor AS inTransitMinor, addresses_read AS addressesRead,
         float_base_units AS floatBaseUnits, on_chain_in_base_units AS onChainInBaseUnits,
         on_chain_out_base_units AS onChainOutBaseUnits, pending_out_base_units AS pendingOutBaseUnits
       FROM treasury_checks ORDER BY id DESC LIMIT ?`,
    )
    .bind(limit)
    .all<CheckDetail>();
  return rows.results;
}
