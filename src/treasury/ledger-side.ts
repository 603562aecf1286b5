import type { Env, X402Settings } from "../config/env";
import { type LedgerSide, shardFigures } from "../ledger/figures";
import { placementOf } from "../ledger/place";
import { MIN_SWEEP_BASE_UNITS } from "../sweeps/due";
import { readFloat } from "./fundings";

/** The ledger's side and the receiving addresses whose holdings are not swept yet, read together. */
export interface LedgerSnapshot {
  ledger: LedgerSide;
  /** The operator's booked float (src/treasury/fundings.ts), in base units: part of what the chain should hold. */
  floatBaseUnits: bigint;
  /** Lowercase addresses, each once; never the settlement address. */
  unsweptAddresses: string[];
}

/**
 * The ledger's figures and the receiving addresses still holding something of the service's, in one
 * D1 batch per shard (one consistent read of each, src/ledger/figures.ts). It must be read before
 * the chain's block is pinned: a payment, deposit or payout is recorded here only after its
 * transaction is mined, so everything this read counts is already in the block read after it, and
 * an address whose sweep is confirmed here is already empty there. The other way round a settlement
 * mined after the block would be expected and not held: a false shortfall.
 *
 * An address is read while one of its deposits or x402 payments has no confirmed sweep: pending
 * and failed sweeps included (the tokens may still be there), so the scan follows the money in
 * flight, not the number of agents. Deposits under the sweep minimum (dust, never swept, credited
 * as 0 cents) are left out, so dust sent to many deposit addresses cannot grow the scan.
 */
export async function readLedgerSnapshot(env: Env, x: X402Settings): Promise<LedgerSnapshot> {
  // Every place's batch and control's float at once; all of them finish before the caller pins the
  // block. A funding is booked only once its transaction is mined deep enough, so a float read here
  // is in that block too.
  const place = placementOf(env);
  const [perPlace, floatBaseUnits] = await Promise.all([
    Promise.all(place.each().map(({ db }) => shardFigures(db, x, MIN_SWEEP_BASE_UNITS))),
    readFloat(place.control.db, x),
  ]);
  const ledger = { ...perPlace[0]!.ledger };
  for (const one of perPlace.slice(1))
    for (const key of Object.keys(ledger) as (keyof LedgerSide)[]) ledger[key] += one.ledger[key];
  return {
    ledger,
    floatBaseUnits,
    unsweptAddresses: [...new Set(perPlace.flatMap((one) => one.unsweptAddresses))],
  };
}
