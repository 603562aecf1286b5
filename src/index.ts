import { buildApp } from "./app";
import type { Env } from "./config/env";
import { settingsOf } from "./config/env";
import { consumeJobs, enqueueMinuteJobs, type JobMessage } from "./jobs/minute";
import { Invocation, runInvocation } from "./lib/invocation";
import { consumeDeadLetters, consumeDeliveries } from "./webhooks/consumer";

export { WalletDurableObject } from "./agents/wallet.do";
export { LedgerDurableObject } from "./ledger/ledger.do";
export { GrantDurableObject } from "./paylinks/grant.do";
export { X402SettlerDurableObject } from "./x402/settler.do";

const app = buildApp();

/** The jobs queue's name, in every environment (agent-pay-jobs, agent-pay-jobs-production). */
const isJobsQueue = (name: string) => /^agent-pay-jobs(-|$)/.test(name);

export default {
  async fetch(request, env, ctx) {
    return runInvocation(new Invocation(), async () => app.fetch(request, env, ctx));
  },

  /** Every minute: a message per job of src/jobs/table.ts, after the settings are known to parse. */
  async scheduled(_controller, env, _ctx) {
    settingsOf(env);
    await runInvocation(new Invocation(), () => enqueueMinuteJobs(env));
  },

  /** The jobs queue (each message a job, run in an invocation of its own), the webhook queue and its dead-letter queue. */
  async queue(batch, env) {
    settingsOf(env);
    if (isJobsQueue(batch.queue)) return consumeJobs(batch as MessageBatch<JobMessage>, env);
    await runInvocation(new Invocation(), () =>
      batch.queue.endsWith("-dlq") ? consumeDeadLetters(batch, env) : consumeDeliveries(batch, env),
    );
  },
} satisfies ExportedHandler<Env>;
