import { index, sqliteTable, text } from "drizzle-orm/sqlite-core";

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
