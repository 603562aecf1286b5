/*
 * The outbox's rows are written by the ledger's plans as well, so they are made in src/ledger/outbox.ts;
 * the domains that write events in their own batches take them from here, as they always did.
 */
export {
  EVENT_TYPES,
  type EventType,
  outboxEvent,
  outboxEvents,
  outboxEventWhen,
  outboxEventWithFigure,
} from "../ledger/outbox";
