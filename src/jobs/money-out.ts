import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { sendsOut } from "../outbound/authorization";
import { advanceDuePayouts } from "../payouts/service";
import { advanceDueRefunds } from "../refunds/service";
import { sweepToSettlement } from "../sweeps/run";

/*
 * The cron's jobs that send money out. Sweeps need only a gas key (the receiving key signs them);
 * payouts and refunds also need the settlement key. Without them a job has nothing to do.
 * Payouts and refunds record their outcome's event and fan it out themselves (`dispatchAfterWrite`).
 */

const gasKeyed = (env: Env) => {
  const x = settingsOf(env).x402;
  return x && x.facilitatorPrivateKeys.length > 0 ? x : null;
};

export async function sweepsJob(env: Env) {
  const x = gasKeyed(env);
  return x ? sweepToSettlement(env, x) : null;
}

export async function payoutsJob(env: Env) {
  const x = gasKeyed(env);
  return x && sendsOut(x) ? advanceDuePayouts(env, x) : null;
}

export async function refundsJob(env: Env) {
  const x = gasKeyed(env);
  return x && sendsOut(x) ? advanceDueRefunds(env, x) : null;
}
