import { buildApp } from "./app";
import { expireOverdueApprovalsEverywhere } from "./approvals/service";
import type { Env } from "./env";
import { settingsOf } from "./env";
import { consumeDeadLetters, consumeDeliveries } from "./webhooks/consumer";
import { dispatchOutbox, enqueueDeliveries, redriveDueDeliveries } from "./webhooks/dispatch";
import { reconcileOpenPayments } from "./x402/reconcile";
import { watchDeposits } from "./deposits/watcher";
import { log } from "./lib/log";
import { retentionJob } from "./retention";
import { moneyOutJobs } from "./money-out";
import { treasuryCheckJob } from "./treasury/check";
import { auditCheckpointJob } from "./checkpoints/anchoring";
import { archiveHistory } from "./archive/archive";
import { recoverTransfers } from "./agents/transfer-recovery";

export { LedgerDurableObject } from "./ledger/ledger.do";
export { WalletDurableObject } from "./agents/wallet.do";
export { GrantDurableObject } from "./paylinks/grant.do";
export { X402SettlerDurableObject } from "./x402/settler.do";

const app = buildApp();

export default {
  async fetch(request, env, ctx) {
    return app.fetch(request, env, ctx);
  },

  /**
   * Every minute: sweep approvals past their expiry; finish payments across ledger shards left pending; delete expired rows and old webhook history; fan out the outbox; re-enqueue deliveries whose
   * message was lost; reconcile x402 settlements with unknown outcomes; credit confirmed deposits; move payouts, refunds and
   * sweeps whose transfers nobody has moved for a while; reconcile the treasury against the chain; sign and
   * anchor an audit checkpoint when the head moved; archive checkpointed history past ARCHIVE_AFTER_DAYS to R2.
   */
  async scheduled(_controller, env, ctx) {
    settingsOf(env);
    ctx.waitUntil(
      (async () => {
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
        };
        const settled = await Promise.allSettled(Object.values(jobs));
        Object.keys(jobs).forEach((job, i) => {
          const outcome = settled[i]!;
          if (outcome.status === "rejected") log.error("cron", { job, error: outcome.reason });
        });
        await dispatchOutbox(env);
        await enqueueDeliveries(env, await redriveDueDeliveries(env));
      })(),
    );
  },

  /** The webhook queue and its dead-letter queue. */
  async queue(batch, env) {
    settingsOf(env);
    if (batch.queue.endsWith("-dlq")) await consumeDeadLetters(batch, env);
    else await consumeDeliveries(batch, env);
  },
} satisfies ExportedHandler<Env>;
