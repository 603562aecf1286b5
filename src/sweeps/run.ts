import type { Env, X402Settings } from "../config/env";
import { executeBatch, guardReasonOf } from "../db/statements";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { dbOfTransfer, OUTCOME_RECORDED, outboundOutcomeStatements } from "../outbound/advance";
import { advanceDue, type Completion } from "../outbound/run";
import { createDueSweeps, SWEEPS_PER_RUN } from "./due";

/** Sweeps sent side by side in one run. */
const SWEEPS_AT_ONCE = 4;

/**
 * Records a sweep's decided outcome, once: only the transfer row changes, in the shard its id names. A sweep moves tokens
 * between the service's own addresses, so it has no ledger posting, and no audit row either: the
 * audit chain records the ledger's movements (whose money it is), which a sweep does not change,
 * and its value need not be whole cents. Its record is the transfer row with its transaction, and
 * the chain's Transfer event. A failure is logged as an error: tokens gone from an address whose
 * key only the service holds, or a key it no longer derives, is for an operator to look at.
 */
const completeSweep: Completion = async (env, _x, t, outcome) => {
  try {
    await executeBatch(dbOfTransfer(env, t), outboundOutcomeStatements(t, outcome, nowIso()));
  } catch (error) {
    // Another worker recorded it first.
    if (guardReasonOf(error) === OUTCOME_RECORDED) return null;
    throw error;
  }
  if (outcome.kind === "failed")
    log.error("sweep_failed", { id: t.id, ownerId: t.ownerId, from: t.fromAddress, reason: outcome.reason });
  // Nothing for the outbox: a sweep has no event.
  return null;
};

export interface SweepRun {
  created: number;
  confirmed: number;
  failed: number;
  waiting: number;
}

/**
 * The cron's sweep job: writes the sweeps owed (credited deposits, x402 payments left on receiving
 * addresses), then steps the open ones, a few at a time. Runs side by side are safe: a sweep's row
 * is written once, only one worker hands it over, and its authorization moves the value at most once.
 * Every ledger shard's deposits and payments are swept, each sweep in its source's shard.
 */
export async function sweepToSettlement(env: Env, x: X402Settings, now = Date.now()): Promise<SweepRun> {
  const created = await createDueSweeps(env, x);
  const stepped = await advanceDue(env, x, "sweep", completeSweep, now, {
    limit: SWEEPS_PER_RUN,
    atOnce: SWEEPS_AT_ONCE,
    withUnsent: true,
    failWithoutKey: true,
  });
  return { created, ...stepped };
}
