import { expireOverdueApprovalsEverywhere } from "../approvals/service";
import { archiveHistory } from "../archive/archive";
import { auditVerifyJob } from "../audit/verify-job";
import { auditCheckpointJob } from "../checkpoints/anchoring";
import type { Env } from "../config/env";
import { watchDeposits } from "../deposits/watcher";
import { recoverTransfers } from "../ledger/transfer-recovery";
import { treasuryCheckJob } from "../treasury/check";
import { reconcileAgentX402Payments } from "../x402/outbound/life";
import { reconcileOpenPayments } from "../x402/reconcile";
import { payoutsJob, refundsJob, sweepsJob } from "./money-out";
import { outboxJob } from "./outbox";
import { retentionJob } from "./retention";

/** One of the cron's jobs: what one queue message runs, in an invocation of its own. */
export interface CronJob {
  /**
   * `place`: a message per ledger shard, whose env's placement walks that shard alone, so one run's
   * cost does not grow with the number of shards. `deployment`: one message for the whole deployment.
   */
  each: "place" | "deployment";
  /** Writes outbox events: the outbox its env walks is fanned out right after, so they go out in this run. */
  events: boolean;
  run(env: Env): Promise<unknown>;
}

const perPlace = (run: CronJob["run"], events = false): CronJob => ({ each: "place", events, run });
const once = (run: CronJob["run"], events = false): CronJob => ({ each: "deployment", events, run });

/**
 * Every job of the minute cron, by the name its messages and logs carry. Adding a job is one line.
 * Each run is bounded by a count of D1 queries and subrequests (it asks `currentInvocation().left()`
 * before each item) as well as by time, and what it leaves is found again as due by its next run.
 */
export const CRON_JOBS: Record<string, CronJob> = {
  approvals_expiry: perPlace((env) => expireOverdueApprovalsEverywhere(env)),
  x402_reconcile: perPlace((env) => reconcileOpenPayments(env), true),
  agent_x402_reconcile: perPlace((env) => reconcileAgentX402Payments(env), true),
  transfer_recover: perPlace((env) => recoverTransfers(env), true),
  deposit_watch: once(watchDeposits, true),
  retention: perPlace((env) => retentionJob(env)),
  treasury_sweeps: perPlace(sweepsJob),
  payouts: perPlace(payoutsJob),
  refunds: perPlace(refundsJob),
  treasury_check: once(treasuryCheckJob, true),
  audit_checkpoint: perPlace((env) => auditCheckpointJob(env)),
  audit_archive: perPlace((env) => archiveHistory(env)),
  audit_verify: perPlace((env) => auditVerifyJob(env)),
  outbox: perPlace(outboxJob),
};
