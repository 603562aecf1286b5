import { executeBatch, guardReasonOf } from "../db/statements";
import type { Env, X402Settings } from "../env";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import {
  advanceOutbound,
  OUTCOME_RECORDED,
  outboundOutcomeStatements,
  RESEND_AFTER_MS,
  type Advance,
} from "../outbound/advance";
import { OUTBOUND_SELECT, type OutboundTransfer } from "../outbound/authorization";
import { createDueSweeps, SWEEPS_PER_RUN } from "./due";

/** Sweeps sent side by side in one run: each waits for its receipt, the gas keys' lanes order the sends. */
const SWEEPS_AT_ONCE = 4;

/**
 * Records a sweep's decided outcome, once: only the transfer row changes. A sweep moves tokens
 * between the service's own addresses, so it has no ledger posting, and no audit row either: the
 * audit chain records the ledger's movements (whose money it is), which a sweep does not change,
 * and its value need not be whole cents. Its record is the transfer row with its transaction, and
 * the chain's Transfer event. A failure is logged as an error: tokens gone from an address whose
 * key only the service holds, or a key it no longer derives, is for an operator to look at.
 */
export async function completeSweep(env: Env, t: OutboundTransfer, outcome: Exclude<Advance, { kind: "waiting" }>) {
  try {
    await executeBatch(env.DB, outboundOutcomeStatements(t, outcome, nowIso()));
  } catch (error) {
    // Another worker recorded it first.
    if (guardReasonOf(error) === OUTCOME_RECORDED) return;
    throw error;
  }
  if (outcome.kind === "failed")
    log.error("sweep_failed", { id: t.id, ownerId: t.ownerId, from: t.fromAddress, reason: outcome.reason });
}

/**
 * One step with a sweep, its outcome recorded once decided. A sweep whose key the service does
 * not hold (anymore) can never go: never handed over, it fails rather than waiting every run.
 */
async function stepSweep(env: Env, x: X402Settings, t: OutboundTransfer): Promise<Advance["kind"]> {
  let outcome = await advanceOutbound(env, x, t);
  if (outcome.kind === "waiting" && outcome.reason === "signer_key_missing" && t.broadcastAt === null)
    outcome = { kind: "failed", reason: "signer_key_missing", unsent: true };
  if (outcome.kind === "waiting") {
    log.info("outbound_waiting", { purpose: t.purpose, id: t.id, reason: outcome.reason });
    return "waiting";
  }
  await completeSweep(env, t, outcome);
  return outcome.kind;
}

/**
 * The pending sweeps to step now: every one never handed over (just written, or its run stopped
 * first), and those handed over and untouched for `RESEND_AFTER_MS`, oldest first.
 */
async function openSweeps(env: Env, now: number, limit: number): Promise<OutboundTransfer[]> {
  const rows = await env.DB.prepare(
    `${OUTBOUND_SELECT} WHERE status = 'pending' AND purpose = 'sweep' AND (broadcast_at IS NULL OR updated_at <= ?)
     ORDER BY updated_at LIMIT ?`,
  )
    .bind(nowIso(now - RESEND_AFTER_MS), limit)
    .all<OutboundTransfer>();
  return rows.results;
}

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
 */
export async function sweepToSettlement(env: Env, x: X402Settings, now = Date.now()): Promise<SweepRun> {
  const run: SweepRun = { created: await createDueSweeps(env, x), confirmed: 0, failed: 0, waiting: 0 };
  const open = await openSweeps(env, now, SWEEPS_PER_RUN);
  for (let i = 0; i < open.length; i += SWEEPS_AT_ONCE) {
    const steps = await Promise.allSettled(open.slice(i, i + SWEEPS_AT_ONCE).map((t) => stepSweep(env, x, t)));
    for (const [j, step] of steps.entries()) {
      if (step.status === "fulfilled") run[step.value]++;
      else {
        run.waiting++;
        log.warn("outbound_advance", { purpose: "sweep", id: open[i + j]!.id, error: step.reason });
      }
    }
  }
  return run;
}
