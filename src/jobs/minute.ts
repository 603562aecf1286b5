import { expireOverdueApprovalsEverywhere } from "../approvals/service";
import { archiveHistory } from "../archive/archive";
import { auditVerifyJob } from "../audit/verify-job";
import { auditCheckpointJob } from "../checkpoints/anchoring";
import type { Env } from "../config/env";
import { watchDeposits } from "../deposits/watcher";
import { recoverTransfers } from "../ledger/transfer-recovery";
import { log } from "../lib/log";
import { treasuryCheckJob } from "../treasury/check";
import { dispatchOutbox, enqueueDeliveries, redriveDueDeliveries } from "../webhooks/dispatch";
import { reconcileOpenPayments } from "../x402/reconcile";
import { moneyOutJobs } from "./money-out";
import { retentionJob } from "./retention";

/**
 * The minute cron's work: sweep approvals past their expiry; finish payments across ledger shards
 * left pending; delete expired rows and old webhook history; reconcile x402 settlements with unknown
 * outcomes; credit confirmed deposits; move payouts, refunds and sweeps whose transfers nobody has
 * moved for a while; reconcile the treasury against the chain; sign and anchor an audit checkpoint
 * when the head moved; archive checkpointed history past ARCHIVE_AFTER_DAYS to R2; then fan out the
 * outbox and re-enqueue deliveries whose message was lost.
 */
export async function runMinuteJobs(env: Env): Promise<void> {
  // What may write events first, then the fan-out, so they go out in this same run. A job that
  // fails leaves the others running, and says so: a deposit watcher failing every minute is an outage.
  const jobs = {
    approvals_expiry: expireOverdueApprovalsEverywhere(env),
    x402_reconcile: reconcileOpenPayments(env),
    transfer_recover: recoverTransfers(env),
    deposit_watch: watchDeposits(env),
    retention: retentionJob(env),
    ...moneyOutJobs(env),
    treasury_check: treasuryCheckJob(env),
    audit_checkpoint: auditCheckpointJob(env),
    audit_archive: archiveHistory(env),
    audit_verify: auditVerifyJob(env),
  };
  const settled = await Promise.allSettled(Object.values(jobs));
  Object.keys(jobs).forEach((job, i) => {
    const outcome = settled[i]!;
    if (outcome.status === "rejected") log.error("cron", { job, error: outcome.reason });
  });
  await dispatchOutbox(env);
  await enqueueDeliveries(env, await redriveDueDeliveries(env));
}
