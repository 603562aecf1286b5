import { buildApp } from "./app";
import { expireOverdueApprovals } from "./approvals/service";
import { dbOf } from "./db/client";
import type { Env } from "./env";
import { settingsOf } from "./env";

export { LedgerDurableObject } from "./ledger/ledger.do";
export { WalletDurableObject } from "./agents/wallet.do";
export { GrantDurableObject } from "./paylinks/grant.do";

const app = buildApp();

export default {
  fetch: app.fetch,

  /** Every minute: sweep approvals past their expiry. */
  async scheduled(_controller, env, ctx) {
    settingsOf(env);
    ctx.waitUntil(expireOverdueApprovals(dbOf(env.DB)));
  },
} satisfies ExportedHandler<Env>;
