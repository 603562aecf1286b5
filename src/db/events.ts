import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * The outbox: every webhook event is written in the same batch as the change it
 * reports, then fanned out to endpoints. `dispatchedAt` is null until then.
 */
export const outboxEvents = sqliteTable(
  "outbox_events",
  {
    id: text("id").primaryKey(),
    type: text("type").notNull(),
    /** The merchant whose webhooks receive it; null for service-wide events. */
    merchantId: text("merchant_id"),
    data: text("data").notNull(),
    createdAt: text("created_at").notNull(),
    dispatchedAt: text("dispatched_at"),
  },
  (t) => [index("outbox_events_undispatched").on(t.dispatchedAt, t.createdAt)],
);

/** A receiving URL registered by a console user. Secrets are stored encrypted (AES-GCM), never in plaintext. */
export const webhookEndpoints = sqliteTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    url: text("url").notNull(),
    /** JSON array of event kinds; empty means all. */
    events: text("events").notNull(),
    /** Only this merchant's events when set; every event when null. */
    merchantId: text("merchant_id"),
    secretCiphertext: text("secret_ciphertext").notNull(),
    /** The secret before the last rotation, still signing until `previousSecretExpiresAt`. */
    previousSecretCiphertext: text("previous_secret_ciphertext"),
    previousSecretExpiresAt: text("previous_secret_expires_at"),
    createdBy: text("created_by").notNull(),
    createdAt: text("created_at").notNull(),
    /** No longer delivered to: removed with DELETE, or disabled by the service for failing (`endpoint.disabled`). */
    disabledAt: text("disabled_at"),
    /** Removed with DELETE: gone from the console and the deliveries API too (its rows are kept). */
    deletedAt: text("deleted_at"),
  },
  (t) => [index("webhook_endpoints_merchant").on(t.merchantId)],
);

/** One event's delivery to one endpoint; every attempt updates it and appends a `webhook_attempts` row. */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    eventId: text("event_id").notNull(),
    endpointId: text("endpoint_id").notNull(),
    type: text("type").notNull(),
    /** `pending`, `delivered` or `failed` (for good: retries exhausted, dead-lettered or endpoint disabled). */
    status: text("status").notNull(),
    attempts: integer("attempts").notNull().default(0),
    lastStatusCode: integer("last_status_code"),
    lastError: text("last_error"),
    nextAttemptAt: text("next_attempt_at"),
    createdAt: text("created_at").notNull(),
    deliveredAt: text("delivered_at"),
  },
  (t) => [
    uniqueIndex("webhook_deliveries_event_endpoint").on(t.eventId, t.endpointId),
    index("webhook_deliveries_endpoint_created").on(t.endpointId, t.createdAt),
    // Partial, each over the deliveries its one reader looks for (a query's term identical to the
    // index's condition is what lets SQLite use it): a delivery is in one of the two at a time.
    // Pending ones by when they are due (the redrive), finished ones by age (the retention's deletes).
    index("webhook_deliveries_due").on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    index("webhook_deliveries_finished").on(t.createdAt).where(sql`${t.status} <> 'pending'`),
  ],
);

export const webhookAttempts = sqliteTable(
  "webhook_attempts",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    deliveryId: text("delivery_id").notNull(),
    attempt: integer("attempt").notNull(),
    statusCode: integer("status_code"),
    error: text("error"),
    durationMs: integer("duration_ms").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("webhook_attempts_delivery").on(t.deliveryId)],
);
