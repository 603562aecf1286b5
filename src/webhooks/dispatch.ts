import type { Env } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { faultPoint } from "../lib/faults";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";

export interface DeliveryMessage {
  deliveryId: string;
  /** On the dead-letter queue: this delivery was already recorded as failed by the consumer. */
  final?: boolean;
}

const FAN_OUT_PAGE = 100;
/** A forwarded page: its read, its copy into control and its mark (3 statements). */
const FORWARD_COST = { d1Queries: 3 } as const;
/**
 * A fan-out round: its page read, the deliveries' insert and the events' mark (3), the check for more
 * (1), and the deliveries' queue sends (a hundred a send: 2 covers a page of events for 2 endpoints
 * each; more endpoints take more, counted as they go).
 */
const FAN_OUT_COST = { d1Queries: 4, subrequests: 2 } as const;

/** The database of webhooks: endpoints, deliveries, attempts and the events they fan out from live in control. */
export const webhooksDb = (env: Env): D1Database => placementOf(env).control.db;

/**
 * Fans undispatched outbox events out to the endpoints that want them. The
 * deliveries and the event's `dispatched_at` are written in one batch, and the
 * insert only reads events not yet dispatched, so each (event, endpoint) pair
 * gets exactly one delivery row however many dispatchers run. Returns the new
 * deliveries, which the caller enqueues; one whose message is lost is found
 * again by `redriveDueDeliveries`.
 */
export async function fanOutOutbox(env: Env, now = Date.now()): Promise<string[]> {
  const db = webhooksDb(env);
  const pending = await db
    .prepare("SELECT id FROM outbox_events WHERE dispatched_at IS NULL ORDER BY created_at LIMIT ?")
    .bind(FAN_OUT_PAGE)
    .all<{ id: string }>();
  const ids = pending.results.map((r) => r.id);
  if (ids.length === 0) return [];
  const at = nowIso(now);
  // The page's ids as one JSON parameter: D1 refuses a statement with more than 100 bound values.
  const page = JSON.stringify(ids);
  const [inserted] = await db.batch([
    db
      .prepare(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, type, status, attempts, next_attempt_at, created_at)
       SELECT 'whd_' || lower(hex(randomblob(12))), e.id, ep.id, e.type, 'pending', 0, ?, ?
       FROM outbox_events e JOIN webhook_endpoints ep
         ON ep.disabled_at IS NULL
        AND (ep.merchant_id IS NULL OR ep.merchant_id = e.merchant_id)
        AND (ep.events = '[]' OR EXISTS (SELECT 1 FROM json_each(ep.events) WHERE json_each.value = e.type))
       WHERE e.id IN (SELECT value FROM json_each(?)) AND e.dispatched_at IS NULL
       ON CONFLICT (event_id, endpoint_id) DO NOTHING
       RETURNING id`,
      )
      .bind(at, at, page),
    db
      .prepare(
        "UPDATE outbox_events SET dispatched_at = ? WHERE id IN (SELECT value FROM json_each(?)) AND dispatched_at IS NULL",
      )
      .bind(at, page),
  ]);
  return ((inserted?.results ?? []) as { id: string }[]).map((r) => r.id);
}

/** Deliveries that are due but whose queue message may have been lost (a crash between the batch and the send). */
export async function redriveDueDeliveries(env: Env, now = Date.now(), graceMs = 60_000): Promise<string[]> {
  const due = await webhooksDb(env)
    .prepare("SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 500")
    .bind(nowIso(now - graceMs))
    .all<{ id: string }>();
  return due.results.map((r) => r.id);
}

export async function enqueueDeliveries(env: Env, deliveryIds: string[]): Promise<void> {
  for (let i = 0; i < deliveryIds.length; i += 100) {
    await env.WEBHOOK_QUEUE.sendBatch(
      deliveryIds.slice(i, i + 100).map((deliveryId) => ({ body: { deliveryId } satisfies DeliveryMessage })),
    );
  }
}

/**
 * Brings one page of the undispatched outbox events of a place other than control (`from`) into
 * the control database, where the endpoints and deliveries live: a copy of each event,
 * undispatched, which the fan-out above then delivers as it does control's own. The copy keeps the
 * event's id, so it is written once (INSERT OR IGNORE) and the deliveries insert stays one per
 * (event, endpoint); only then is the page marked dispatched where it came from. A crash in
 * between forwards the page again, which changes nothing. Returns how many events the page had.
 */
export async function forwardShardOutbox(env: Env, from: Place, now = Date.now()): Promise<number> {
  const pending = await from.db
    .prepare(
      `SELECT id, type, merchant_id AS merchantId, data, created_at AS createdAt
       FROM outbox_events WHERE dispatched_at IS NULL ORDER BY created_at LIMIT ?`,
    )
    .bind(FAN_OUT_PAGE)
    .all<{ id: string; type: string; merchantId: string | null; data: string; createdAt: string }>();
  const events = pending.results;
  if (events.length === 0) return 0;
  // As one JSON parameter, like the fan-out's page: D1 refuses more than 100 bound values.
  await webhooksDb(env)
    .prepare(
      `INSERT OR IGNORE INTO outbox_events (id, type, merchant_id, data, created_at)
     SELECT json_extract(value, '$.id'), json_extract(value, '$.type'), json_extract(value, '$.merchantId'),
            json_extract(value, '$.data'), json_extract(value, '$.createdAt')
     FROM json_each(?)`,
    )
    .bind(JSON.stringify(events))
    .run();
  faultPoint("outbox.after_forward");
  await from.db
    .prepare(
      "UPDATE outbox_events SET dispatched_at = ? WHERE id IN (SELECT value FROM json_each(?)) AND dispatched_at IS NULL",
    )
    .bind(nowIso(now), JSON.stringify(events.map((e) => e.id)))
    .run();
  return events.length;
}

/** Forwards every other place's pending events into control, where control's own already are. */
async function forwardShardOutboxes(env: Env): Promise<void> {
  for (const from of placementOf(env).each()) {
    if (from.isControl) continue;
    // A page is 3 statements; a page left waits for the next fan-out, still undispatched where it is.
    while (roomFor(FORWARD_COST, "outbox_forward") && (await forwardShardOutbox(env, from)) === FAN_OUT_PAGE);
  }
}

/** Fans out everything pending, every shard's, and enqueues it. Safe to run concurrently and repeatedly. */
export async function dispatchOutbox(env: Env): Promise<number> {
  await forwardShardOutboxes(env);
  let total = 0;
  // What a round leaves undispatched is the next fan-out's (a request's, or the cron's next minute).
  while (roomFor(FAN_OUT_COST, "outbox_fan_out")) {
    const ids = await fanOutOutbox(env);
    if (ids.length > 0) await enqueueDeliveries(env, ids);
    total += ids.length;
    const more = await webhooksDb(env)
      .prepare("SELECT 1 AS more FROM outbox_events WHERE dispatched_at IS NULL LIMIT 1")
      .first();
    if (!more) return total;
  }
  return total;
}

export type RedeliverOutcome = "queued" | "endpoint_not_found" | "delivery_not_found" | "not_redeliverable";

/**
 * Sends a finished delivery again: the retry schedule starts over and the
 * earlier attempts stay recorded. Not redeliverable when it is still pending,
 * or its endpoint is disabled by the service: nothing would be sent, the
 * attempt would only fail with `endpoint_disabled`. An endpoint removed with
 * DELETE is not found, as its deliveries list is.
 */
export async function redeliver(env: Env, endpointId: string, deliveryId: string): Promise<RedeliverOutcome> {
  const row = await webhooksDb(env)
    .prepare(
      `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = ?, delivered_at = NULL
     WHERE id = ? AND endpoint_id = ? AND status IN ('failed', 'delivered')
       AND EXISTS (SELECT 1 FROM webhook_endpoints ep WHERE ep.id = webhook_deliveries.endpoint_id AND ep.disabled_at IS NULL)
     RETURNING id`,
    )
    .bind(nowIso(), deliveryId, endpointId)
    .first();
  if (!row) return whyNotRedelivered(env, endpointId, deliveryId);
  await enqueueDeliveries(env, [deliveryId]);
  return "queued";
}

/** Why the update matched nothing, read after it (the update stays the one guarded write). */
async function whyNotRedelivered(
  env: Env,
  endpointId: string,
  deliveryId: string,
): Promise<Exclude<RedeliverOutcome, "queued">> {
  const found = await webhooksDb(env)
    .prepare(
      `SELECT ep.deleted_at IS NULL AS live, d.id IS NOT NULL AS owned
     FROM webhook_endpoints ep LEFT JOIN webhook_deliveries d ON d.id = ? AND d.endpoint_id = ep.id
     WHERE ep.id = ?`,
    )
    .bind(deliveryId, endpointId)
    .first<{ live: number; owned: number }>();
  if (!found?.live) return "endpoint_not_found";
  // Another endpoint's delivery is not found here: its id says nothing about this endpoint.
  if (!found.owned) return "delivery_not_found";
  return "not_redeliverable";
}

/** How long one request's fan-out loop may keep going for requests that came after it. */
const COALESCE_WINDOW_MS = 5_000;
/**
 * How long the loop lets events gather before going round again for requests that finished
 * meanwhile. Without the pause, under load it went round as fast as D1 answered, three queries
 * each time for a handful of events: as many queries as the payments themselves made.
 */
const FAN_OUT_PACE_MS = 100;
let inFlight: { since: number } | null = null;
let rerun = false;

/**
 * The fan-out a write request starts after answering. Under load many
 * requests finish at once, and each running its own fan-out would multiply
 * the D1 reads for the same few events; so one fan-out runs per isolate at a
 * time, and requests that finish meanwhile only ask it to go round once more.
 * A loop is bounded (and a loop that vanished, say with its request's
 * waitUntil, is replaced after the window); what any of this misses, the
 * minute cron fans out.
 */
export async function dispatchAfterWrite(env: Env, now = Date.now()): Promise<void> {
  if (inFlight && now - inFlight.since < COALESCE_WINDOW_MS) {
    rerun = true;
    return;
  }
  const mine = { since: now };
  inFlight = mine;
  try {
    for (;;) {
      rerun = false;
      await dispatchOutbox(env);
      if (!rerun || Date.now() - mine.since >= COALESCE_WINDOW_MS) break;
      await new Promise((resolve) => setTimeout(resolve, FAN_OUT_PACE_MS));
    }
  } finally {
    if (inFlight === mine) inFlight = null;
  }
}
