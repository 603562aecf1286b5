import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { sendsOut } from "../outbound/authorization";
import { advanceDuePayouts } from "../payouts/service";
import { advanceDueRefunds } from "../refunds/service";
import { sweepToSettlement } from "../sweeps/run";

/**
 * The cron's jobs that send money out. Sweeps need only a gas key (the receiving key signs them);
 * payouts and refunds also need the settlement key.
 */
export function moneyOutJobs(env: Env): Record<string, Promise<unknown>> {
  const x = settingsOf(env).x402;
  if (!x || x.facilitatorPrivateKeys.length === 0) return {};
  const jobs: Record<string, Promise<unknown>> = { treasury_sweeps: sweepToSettlement(env, x) };
  if (sendsOut(x)) {
    jobs.payouts = advanceDuePayouts(env, x);
    jobs.refunds = advanceDueRefunds(env, x);
  }
  return jobs;
}
