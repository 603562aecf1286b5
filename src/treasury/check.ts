import { type Env, settingsOf, type X402Settings } from "../config/env";
import { executeBatch, sqlStatement } from "../db/statements";
import type { LedgerSide } from "../ledger/figures";
import { outboxEventWhen } from "../ledger/outbox";
import { placementOf } from "../ledger/place";
import { wholeCentsOf } from "../lib/money";
import { nowIso } from "../lib/time";
import { type Holdings, readHoldings } from "./holdings";
import { readLedgerSnapshot } from "./ledger-side";

export type TreasuryStatus = "balanced" | "surplus" | "shortfall";

/** One reconciliation: holdings at one block against what the ledger expects, and the verdict. */
export interface TreasuryCheck {
  at: string;
  settlementAddress: string;
  holdings: Holdings;
  ledger: LedgerSide & { floatBaseUnits: bigint; expectedBaseUnits: bigint };
  differenceBaseUnits: bigint;
  status: TreasuryStatus;
  /** Whether this check announced a new shortfall episode (`treasury.shortfall`). */
  announced: boolean;
}

/**
 * The verdict: a surplus when the chain holds more than the ledger expects; a shortfall when it
 * holds less even after every pending payout and refund leaves (a transfer out that is mined but
 * not yet recorded as such is no shortfall); balanced otherwise.
 */
export function treasuryStatus(total: bigint, expected: bigint, pendingOutBaseUnits: bigint): TreasuryStatus {
  if (total > expected) return "surplus";
  if (total < expected - pendingOutBaseUnits) return "shortfall";
  return "balanced";
}

/**
 * What the chain should hold, to the base unit: everything in less everything out, plus the
 * operator's float. Never from cents: payments below a cent would go missing in the rounding.
 */
export const expectedBaseUnits = (ledger: LedgerSide, floatBaseUnits: bigint) =>
  ledger.onChainInBaseUnits - ledger.onChainOutBaseUnits + floatBaseUnits;

/**
 * A shortfall is announced once per episode: the event is written only when the check stored just
 * before this one (in the same batch, so the latest but one) was not short. Two checks racing are
 * two batches, one after the other: the second sees the first and stays silent.
 */
const EPISODE_STARTS = `COALESCE((SELECT status FROM treasury_checks
  WHERE id < (SELECT MAX(id) FROM treasury_checks) ORDER BY id DESC LIMIT 1), '') <> 'shortfall'`;

/**
 * Runs one check now and stores it, with its `treasury.shortfall` event in the same batch when it
 * starts an episode. The ledger is read before the chain (see readLedgerSnapshot), so a payment in
 * flight shows at worst as a passing surplus, never as a shortfall.
 */
export async function runTreasuryCheck(env: Env, x: X402Settings): Promise<TreasuryCheck> {
  const { ledger, floatBaseUnits, unsweptAddresses } = await readLedgerSnapshot(env, x);
  const holdings = await readHoldings(x, unsweptAddresses);
  const expected = expectedBaseUnits(ledger, floatBaseUnits);
  const difference = holdings.totalBaseUnits - expected;
  const status = treasuryStatus(holdings.totalBaseUnits, expected, ledger.pendingOutBaseUnits);
  const at = nowIso();
  const statements = [
    sqlStatement(
      `INSERT INTO treasury_checks (at, as_of_block, status, settlement_base_units, deposit_addresses_base_units,
         total_base_units, expected_base_units, difference_base_units, on_chain_in_minor, on_chain_out_minor,
         pending_out_minor, in_transit_minor, addresses_read, float_base_units, on_chain_in_base_units,
         on_chain_out_base_units, pending_out_base_units)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      at,
      holdings.asOfBlock,
      status,
      holdings.settlementBaseUnits.toString(),
      holdings.depositAddressesBaseUnits.toString(),
      holdings.totalBaseUnits.toString(),
      expected.toString(),
      difference.toString(),
      // The cents columns as the API states them (rounded down); the exact figures beside them.
      wholeCentsOf(ledger.onChainInBaseUnits),
      wholeCentsOf(ledger.onChainOutBaseUnits),
      wholeCentsOf(ledger.pendingOutBaseUnits),
      wholeCentsOf(ledger.inTransitBaseUnits),
      holdings.addressesRead,
      floatBaseUnits.toString(),
      ledger.onChainInBaseUnits.toString(),
      ledger.onChainOutBaseUnits.toString(),
      ledger.pendingOutBaseUnits.toString(),
    ),
  ];
  if (status === "shortfall") {
    const data = {
      asOfBlock: holdings.asOfBlock,
      differenceBaseUnits: difference.toString(),
      expectedBaseUnits: expected.toString(),
      totalBaseUnits: holdings.totalBaseUnits.toString(),
    };
    statements.push(outboxEventWhen("treasury.shortfall", null, data, at, EPISODE_STARTS));
  }
  const results = await executeBatch(placementOf(env).control.db, statements);
  return {
    at,
    settlementAddress: x.payTo.toLowerCase(),
    holdings,
    ledger: { ...ledger, floatBaseUnits, expectedBaseUnits: expected },
    differenceBaseUnits: difference,
    status,
    announced: (results[1]?.meta.changes ?? 0) > 0,
  };
}

/** The cron's job: a check, stored, when this deployment takes payments on chain. */
export async function treasuryCheckJob(env: Env): Promise<TreasuryStatus | null> {
  const x = settingsOf(env).x402;
  return x ? (await runTreasuryCheck(env, x)).status : null;
}
