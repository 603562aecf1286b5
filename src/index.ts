import { buildApp } from "./app";
import type { Env } from "./config/env";
import { settingsOf } from "./config/env";
import { runMinuteJobs } from "./jobs/minute";
import { Invocation, runInvocation } from "./lib/invocation";
import { consumeDeadLetters, consumeDeliveries } from "./webhooks/consumer";

export { WalletDurableObject } from "./agents/wallet.do";
export { LedgerDurableObject } from "./ledger/ledger.do";
export { GrantDurableObject } from "./paylinks/grant.do";
export { X402SettlerDurableObject } from "./x402/settler.do";

const app = buildApp();

export default {
  async fetch(request, env, ctx) {
    return runInvocation(new Invocation(), async () => app.fetch(request, env, ctx));
  },

  /** Every minute: the jobs of src/jobs/minute.ts, after the settings are known to parse. */
  async scheduled(_controller, env, ctx) {
    settingsOf(env);
    ctx.waitUntil(runInvocation(new Invocation(), () => runMinuteJobs(env)));
  },

  /** The webhook queue and its dead-letter queue. */
  async queue(batch, env) {
    settingsOf(env);
    await runInvocation(new Invocation(), () =>
      batch.queue.endsWith("-dlq") ? consumeDeadLetters(batch, env) : consumeDeliveries(batch, env),
    );
  },
} satisfies ExportedHandler<Env>;
