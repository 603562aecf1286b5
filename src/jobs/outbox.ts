import type { Env } from "../config/env";
import { placementOf } from "../ledger/place";
import { dispatchOutbox, enqueueDeliveries, redriveDueDeliveries } from "../webhooks/dispatch";

/**
 * The outbox's backstop: events written where nothing fanned them out (a request whose
 * `dispatchAfterWrite` was cut short) go out, the place's own forwarded to control first; and, in
 * control's run, deliveries whose queue message was lost are enqueued again.
 */
export async function outboxJob(env: Env): Promise<number> {
  const sent = await dispatchOutbox(env);
  if (
    placementOf(env)
      .each()
      .some((at) => at.isControl)
  )
    await enqueueDeliveries(env, await redriveDueDeliveries(env));
  return sent;
}
