import { z } from "zod";
import type { Env } from "../config/env";
import { MAX_QUEUE_DELAY_SECONDS, type Settings, settingsOf } from "../config/env";
import { FAILING_ENDPOINT_DAYS } from "../config/webhooks";
import { executeBatch, sqlStatement } from "../db/statements";
import { outboxEventWhen } from "../ledger/outbox";
import { checkDestination } from "../lib/dns-guard";
import { faultPoint } from "../lib/faults";
import { currentInvocation } from "../lib/invocation";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { type DeliveryMessage, webhooksDb } from "./dispatch";
import { type EndpointRow, signingSecrets } from "./endpoints";
import { signatureHeader } from "./signing";

const MessageSchema = z.object({ deliveryId: z.string().min(1), final: z.boolean().optional() });

/**
 * Deliveries of one batch under way at once. A batch holds up to 10 messages, and an invocation may
 * hold 6 connections open; a POST beyond them waits for one with its timeout already running, so a
 * healthy but slowish receiver would be recorded as timing out. 4 leaves room for the DNS lookups
 * of the send-time guard and the dead-letter sends, and each POST and lookup also takes one of the
 * invocation's connection slots, its timeout started when it is sent.
 */
export const DELIVERIES_IN_FLIGHT = 4;

/** How early a retried message may arrive and still claim its attempt. */
const CLAIM_TOLERANCE_MS = 5_000;
const MAX_ERROR_LENGTH = 300;

interface Claimed {
  attempts: number;
  eventId: string;
  endpointId: string;
}

/** Delay before retry `index`, with ±20 % jitter so retries of many deliveries spread out. */
export function retryDelaySeconds(schedule: number[], index: number, random = Math.random): number | null {
  const base = schedule[index];
  if (base === undefined) return null;
  // Jitter takes the schedule's 12 h entries up to 14.4 h, past what a queue message may wait.
  return Math.min(Math.round(base * (0.8 + 0.4 * random())), MAX_QUEUE_DELAY_SECONDS);
}

/**
 * Takes the attempt: only a pending delivery that is due can be claimed, and
 * claiming pushes its due time past this attempt, so a duplicate message (a
 * redrive, a queue redelivery) finds nothing to do.
 */
async function claim(env: Env, deliveryId: string, now: number, leaseMs: number): Promise<Claimed | null> {
  return webhooksDb(env)
    .prepare(
      `UPDATE webhook_deliveries SET next_attempt_at = ?
     WHERE id = ? AND status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
     RETURNING attempts, event_id AS eventId, endpoint_id AS endpointId`,
    )
    .bind(nowIso(now + leaseMs), deliveryId, nowIso(now + CLAIM_TOLERANCE_MS))
    .first<Claimed>();
}

/** POSTs the signed envelope once; never follows redirects (a redirect could point anywhere). */
async function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<{ statusCode: number | null; error: string | null }> {
  try {
    // The timeout starts when the POST holds a connection, not while it waits for one.
    const status = await currentInvocation().withSlot(async () => {
      const response = await fetch(url, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(timeoutMs),
      });
      // Read (and drop) the body so the connection is released; receivers answer promptly.
      await response.body?.cancel();
      return response.status;
    });
    const ok = status >= 200 && status < 300;
    return { statusCode: status, error: ok ? null : `http_${status}` };
  } catch (error) {
    const name = error instanceof Error ? error.name : "";
    return {
      statusCode: null,
      error:
        name === "TimeoutError" || name === "AbortError"
          ? "timeout"
          : `network: ${String(error instanceof Error ? error.message : error).slice(0, MAX_ERROR_LENGTH)}`,
    };
  }
}

export type AttemptResult = { kind: "done" } | { kind: "retry"; delaySeconds: number } | { kind: "dead" };

type Outcome = { statusCode: number | null; error: string | null };
type DeliveryEvent = { id: string; type: string; data: string; createdAt: string };
type DeliveryEndpoint = EndpointRow & { disabledAt: string | null };

/** One delivery attempt, recorded in D1 whatever its outcome. */
export async function attemptDelivery(env: Env, deliveryId: string, now = Date.now()): Promise<AttemptResult> {
  const settings = settingsOf(env);
  // The lease covers the DNS lookups and the POST, each bounded by the timeout but perhaps waiting as
  // long for a connection slot, and recording it; after that a crashed attempt is free to take again.
  const claimed = await claim(env, deliveryId, now, 2 * settings.webhookTimeoutMs + 15_000);
  if (!claimed) return { kind: "done" };
  const { event, endpoint } = await readDelivery(env, claimed);
  const started = Date.now();
  const outcome: Outcome =
    !event || !endpoint || endpoint.disabledAt
      ? { statusCode: null, error: "endpoint_disabled" }
      : await send(settings, event, endpoint, now);
  const attempt = { deliveryId, number: claimed.attempts + 1, at: nowIso(now), durationMs: Date.now() - started };
  const result = await recordAttempt(env, settings, attempt, outcome, now);
  if (
    endpoint &&
    !endpoint.disabledAt &&
    (outcome.statusCode === 410 || (result.kind === "dead" && (await failingForDays(env, endpoint.id, now))))
  ) {
    await disableFailingEndpoint(env, endpoint.id, outcome.statusCode === 410 ? "gone" : "failing", attempt.at);
  }
  return result;
}

/** The claimed delivery's event and endpoint, in one batch; either may be gone. */
async function readDelivery(
  env: Env,
  claimed: Claimed,
): Promise<{ event: DeliveryEvent | undefined; endpoint: DeliveryEndpoint | undefined }> {
  const db = webhooksDb(env);
  const [eventResult, endpointResult] = await db.batch([
    db.prepare("SELECT id, type, data, created_at AS createdAt FROM outbox_events WHERE id = ?").bind(claimed.eventId),
    db
      .prepare(
        `SELECT id, url, secret_ciphertext AS secretCiphertext, previous_secret_ciphertext AS previousSecretCiphertext,
       previous_secret_expires_at AS previousSecretExpiresAt, disabled_at AS disabledAt FROM webhook_endpoints WHERE id = ?`,
      )
      .bind(claimed.endpointId),
  ]);
  return {
    event: eventResult?.results[0] as DeliveryEvent | undefined,
    endpoint: endpointResult?.results[0] as DeliveryEndpoint | undefined,
  };
}

/** Signs the event's envelope and POSTs it to the endpoint, if its address still passes the SSRF guard. */
async function send(
  settings: Settings,
  event: DeliveryEvent,
  endpoint: DeliveryEndpoint,
  now: number,
): Promise<Outcome> {
  // The exact bytes signed are the bytes sent.
  const body = JSON.stringify({
    id: event.id,
    type: event.type,
    createdAt: event.createdAt,
    data: JSON.parse(event.data) as unknown,
  });
  const timestamp = Math.floor(now / 1000);
  const headers = {
    "content-type": "application/json",
    "user-agent": "agent-pay-webhooks/1",
    "x-service-event": event.type,
    "x-service-signature": await signatureHeader(
      await signingSecrets(settings.webhookSecretsKey, endpoint, now),
      timestamp,
      body,
    ),
  };
  faultPoint("delivery.before_post");
  // The SSRF guard again at send time: the name may resolve somewhere else than when it was registered.
  const destination = await checkDestination(endpoint.url, settings);
  const outcome = destination.ok
    ? await post(endpoint.url, headers, body, settings.webhookTimeoutMs)
    : { statusCode: null, error: destination.reason };
  faultPoint("delivery.after_post");
  return outcome;
}

/**
 * Records the attempt and where the delivery stands after it, in one batch: delivered, pending
 * again at its next retry, or failed when the schedule is over (or the failure is final).
 */
async function recordAttempt(
  env: Env,
  settings: Settings,
  attempt: { deliveryId: string; number: number; at: string; durationMs: number },
  outcome: Outcome,
  now: number,
): Promise<AttemptResult> {
  const db = webhooksDb(env);
  const { deliveryId, number, at } = attempt;
  let result: AttemptResult;
  let update: D1PreparedStatement;
  if (outcome.error === null) {
    result = { kind: "done" };
    update = db
      .prepare(
        "UPDATE webhook_deliveries SET status = 'delivered', attempts = ?, last_status_code = ?, last_error = NULL, next_attempt_at = NULL, delivered_at = ? WHERE id = ?",
      )
      .bind(number, outcome.statusCode, at, deliveryId);
  } else {
    // 410 Gone: the receiver says it is gone for good; no retry, and the endpoint is disabled by the caller.
    const final = outcome.error === "endpoint_disabled" || outcome.statusCode === 410;
    const delay = final ? null : retryDelaySeconds(settings.webhookRetrySchedule, number - 1);
    result = delay === null ? { kind: "dead" } : { kind: "retry", delaySeconds: delay };
    update = db
      .prepare(
        "UPDATE webhook_deliveries SET status = ?, attempts = ?, last_status_code = ?, last_error = ?, next_attempt_at = ? WHERE id = ?",
      )
      .bind(
        delay === null ? "failed" : "pending",
        number,
        outcome.statusCode,
        outcome.error,
        delay === null ? null : nowIso(now + delay * 1000),
        deliveryId,
      );
  }
  await db.batch([
    update,
    db
      .prepare(
        "INSERT INTO webhook_attempts (delivery_id, attempt, status_code, error, duration_ms, created_at) VALUES (?, ?, ?, ?, ?, ?)",
      )
      .bind(deliveryId, number, outcome.statusCode, outcome.error, attempt.durationMs, at),
  ]);
  return result;
}

/** The webhook queue's consumer: one attempt per message, retried on the schedule, dead-lettered at its end. */
export async function consumeDeliveries(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  // A batch's deliveries go out side by side, DELIVERIES_IN_FLIGHT at a time: each is its own claim,
  // POST and record, and one slow receiver (up to WEBHOOK_TIMEOUT_MS) holds up only its own lane. A
  // delivery is claimed when its lane takes it, so its lease and timeout start then.
  const queue = [...batch.messages];
  const lane = async () => {
    for (let message = queue.shift(); message; message = queue.shift()) await consumeDelivery(message, env);
  };
  await Promise.all(Array.from({ length: Math.min(DELIVERIES_IN_FLIGHT, queue.length) }, lane));
}

async function consumeDelivery(message: Message<unknown>, env: Env): Promise<void> {
  const parsed = MessageSchema.safeParse(message.body);
  if (!parsed.success) {
    message.ack(); // Not ours to retry: a malformed message never becomes valid.
    return;
  }
  try {
    const result = await attemptDelivery(env, parsed.data.deliveryId);
    if (result.kind === "retry") message.retry({ delaySeconds: result.delaySeconds });
    else {
      // Recorded as failed already; the dead-letter queue keeps the message for operators' tooling.
      if (result.kind === "dead")
        await env.WEBHOOK_DLQ.send({ deliveryId: parsed.data.deliveryId, final: true } satisfies DeliveryMessage);
      message.ack();
    }
  } catch (error) {
    log.error("webhook_consumer", { deliveryId: parsed.data.deliveryId, error });
    message.retry({ delaySeconds: 5 });
  }
}

/**
 * The dead-letter queue's consumer. Our own final failures arrive marked
 * `final` and are already `failed` in D1 (and may have been redelivered since:
 * they are left alone). A message the platform gave up on after a crashing
 * consumer is marked `failed` here, unless an attempt holds it right now, so
 * an operator sees it and can redeliver it.
 */
export async function consumeDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    const parsed = MessageSchema.safeParse(message.body);
    if (parsed.success && !parsed.data.final) {
      await webhooksDb(env)
        .prepare(
          `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = COALESCE(last_error, 'dead_lettered')
         WHERE id = ? AND status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)`,
        )
        .bind(parsed.data.deliveryId, nowIso())
        .run();
    }
    message.ack();
  }
}

/** No delivery to this endpoint has succeeded for FAILING_ENDPOINT_DAYS, and it has been failing at least that long. */
async function failingForDays(env: Env, endpointId: string, now: number): Promise<boolean> {
  const since = nowIso(now - FAILING_ENDPOINT_DAYS * 86_400_000);
  const row = await webhooksDb(env)
    .prepare(
      `SELECT
       (SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'delivered' AND delivered_at >= ?) AS recentSuccesses,
       (SELECT MIN(created_at) FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'failed') AS firstFailure`,
    )
    .bind(endpointId, since, endpointId)
    .first<{ recentSuccesses: number; firstFailure: string | null }>();
  return row !== null && row.recentSuccesses === 0 && row.firstFailure !== null && row.firstFailure <= since;
}

/**
 * Stops sending to an endpoint that is gone (410) or has failed for days, and
 * tells the operators with an `endpoint.disabled` event (to service-wide
 * endpoints), in the same batch.
 */
async function disableFailingEndpoint(
  env: Env,
  endpointId: string,
  reason: "gone" | "failing",
  at: string,
): Promise<void> {
  await executeBatch(webhooksDb(env), [
    sqlStatement("UPDATE webhook_endpoints SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL", at, endpointId),
    outboxEventWhen("endpoint.disabled", null, { endpointId, reason }, at, "changes() = 1"),
  ]);
}
