import { type DeleteStep, pagedDelete } from "../lib/bounded-deletes";

/*
 * What webhook delivery keeps, and for how long. A delivery that is finished (delivered, or failed
 * for good) and older than the retention goes with its attempts, in one batch; a dispatched event
 * goes once no delivery of it is left, since a delivery is what reads its payload (a redelivery, or
 * an attempt still due). A pending delivery is never removed, however old: redelivering a finished
 * one makes it pending again, and every delete here re-checks that inside its own statement.
 */

/** The finished deliveries of a page, matched identically by both statements of its batch. */
const FINISHED_PAGE = `SELECT id FROM webhook_deliveries
  WHERE status <> 'pending' AND created_at < ?1 AND (delivered_at IS NULL OR delivered_at < ?1)
  LIMIT ?2`;

export function webhookRetentionSteps(db: D1Database, cutoffIso: string): DeleteStep[] {
  return [
    {
      name: "webhook_deliveries",
      async run(limit) {
        // One batch is one transaction: the attempts and their deliveries are the same page.
        const [, deliveries] = await db.batch([
          db.prepare(`DELETE FROM webhook_attempts WHERE delivery_id IN (${FINISHED_PAGE})`).bind(cutoffIso, limit),
          db.prepare(`DELETE FROM webhook_deliveries WHERE id IN (${FINISHED_PAGE})`).bind(cutoffIso, limit),
        ]);
        return deliveries!.meta.changes;
      },
    },
    {
      name: "outbox_events",
      async run(limit) {
        const result = await db
          .prepare(
            `DELETE FROM outbox_events WHERE id IN (
               SELECT e.id FROM outbox_events e
               WHERE e.dispatched_at < ? AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
               LIMIT ?)`,
          )
          .bind(cutoffIso, limit)
          .run();
        return result.meta.changes;
      },
    },
  ];
}

/**
 * A ledger shard's dispatched events older than the cutoff: a shard's event was copied into the
 * control database when it was forwarded (the copy is what deliveries read), so past the retention
 * it goes; an undispatched one never does. `name`: what the log shows when the step falls behind.
 */
export const dispatchedOutboxStep = (db: D1Database, cutoffIso: string, name: string): DeleteStep =>
  pagedDelete(db, name, "outbox_events", "dispatched_at < ?", cutoffIso);
