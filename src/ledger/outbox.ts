import { appendRows, type SqlStatement, sqlStatement } from "../db/statements";
import { canonicalJson } from "../lib/canonical-json";
import { CONTROL_IDS, newId } from "../lib/ids";

/*
 * The outbox: the rows of webhook events, written in the batch of the change they report (a ledger
 * plan's, or any other domain's) and delivered afterwards by src/webhooks. They live here, below
 * the webhooks, because the ledger's plans write them: so src/webhooks may ask the ledger where
 * things live (src/ledger/place.ts) without the two folders importing each other.
 */

export const EVENT_TYPES = [
  "charge.created",
  "payment.succeeded",
  "charge.succeeded",
  "approval.required",
  "paylink.accepted",
  "budget.exhausted",
  "deposit.confirmed",
  "payout.paid",
  "payout.failed",
  "charge.refunded",
  "refund.failed",
  // Operator event (beyond the merchant-facing kinds of docs/api.md): an endpoint was disabled for failing.
  "endpoint.disabled",
  // Operator event: a treasury check found the chain holding less than the ledger expects (once per episode).
  "treasury.shortfall",
  // Operator events: an agent's outbound x402 payment used on chain, or expired unused and given back.
  "agent_payment.settled",
  "agent_payment.released",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

const OUTBOX_INSERT = "INSERT INTO outbox_events (id, type, merchant_id, data, created_at)";

/**
 * The outbox row for one webhook event. It is written in the same batch as the
 * change it reports and delivered afterwards, so no event is lost when a step fails.
 */
export function outboxEvent(
  type: EventType,
  merchantId: string | null,
  data: Record<string, unknown>,
  createdAt: string,
): SqlStatement {
  return outboxEvents(merchantId, data, createdAt, type);
}

/**
 * Events of several types about the same change, with the same data, as one multi-row insert: an
 * appendable one (no statement of a batch reads the outbox; the dispatcher does, after it), so
 * the ledger sequencer writes a group's events in one insert.
 */
export function outboxEvents(
  merchantId: string | null,
  data: Record<string, unknown>,
  createdAt: string,
  ...types: EventType[]
): SqlStatement {
  const payload = canonicalJson(data);
  return appendRows(
    OUTBOX_INSERT,
    5,
    types.map((type) => [newId("webhookEvent", CONTROL_IDS), type, merchantId, payload, createdAt]),
  );
}

/** The same, written only if `condition` (SQL over `params`) holds when the batch runs. */
export function outboxEventWhen(
  type: EventType,
  merchantId: string | null,
  data: Record<string, unknown>,
  createdAt: string,
  condition: string,
  ...params: SqlStatement["params"]
): SqlStatement {
  return sqlStatement(
    `${OUTBOX_INSERT} SELECT ?, ?, ?, ?, ? WHERE ${condition}`,
    newId("webhookEvent", CONTROL_IDS),
    type,
    merchantId,
    canonicalJson(data),
    createdAt,
    ...params,
  );
}

/**
 * The same, for an event that names a figure only its batch knows (a charge's refunded sum after
 * concurrent refunds): `data` carries `"<field>":<placeholder>` and the statement writes in the value
 * of `figureSql`, a scalar subquery that sees the batch's writes before it (as stored Idempotency
 * answers do). The placeholder is a number no JSON string can contain unescaped.
 */
export function outboxEventWithFigure(
  type: EventType,
  merchantId: string | null,
  data: Record<string, unknown>,
  createdAt: string,
  figure: { field: string; placeholder: number; sql: string; params: SqlStatement["params"] },
): SqlStatement {
  return sqlStatement(
    `${OUTBOX_INSERT} SELECT ?, ?, ?, replace(?, ?, ? || (${figure.sql})), ?`,
    newId("webhookEvent", CONTROL_IDS),
    type,
    merchantId,
    canonicalJson(data),
    `"${figure.field}":${figure.placeholder}`,
    `"${figure.field}":`,
    ...figure.params,
    createdAt,
  );
}
