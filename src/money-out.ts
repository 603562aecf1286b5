import type { Env } from "./env";
import { settingsOf } from "./env";
import { sendsOut } from "./outbound/authorization";
import { advanceDuePayouts } from "./payouts/service";
import { advanceDueRefunds } from "./refunds/service";

/** The cron's jobs that send money out: none without the settlement key and a gas key. */
export function moneyOutJobs(env: Env): Record<string, Promise<unknown>> {
  const x = settingsOf(env).x402;
  if (!sendsOut(x)) return {};
  return { payouts: advanceDuePayouts(env, x), refunds: advanceDueRefunds(env, x) };
}
