import { guard, type SqlStatement, sqlStatement } from "./statements";

/*
 * The idempotency_keys table: a request's reservation of its key and the answer
 * stored under it (the middleware that reads and reserves keys is auth/idempotency.ts).
 */
export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;
/**
 * A reservation still `in_progress` after this long lost its request (a crash
 * between the effect and storing the response). The same request may then
 * take it over and run again: every money path is guarded in its batch, so
 * running again ends in the one effect that already happened (or makes it).
 */
export const ABANDONED_AFTER_MS = 60_000;

/** The reserved key of the request being run, for storing its response in the batch of its effect. */
export interface IdempotencySlot {
  scope: string;
  key: string;
  /** This reservation's `created_at`: a key freed and reserved again, or taken over, is another reservation. */
  reservedAt: string;
}

const STORE_RESPONSE = `UPDATE idempotency_keys SET status = 'done', response_status = ?, response_content_type = 'application/json', response_body = `;
const STILL_RESERVED = " WHERE scope = ? AND key = ? AND status = 'in_progress' AND created_at = ?";
const reservationOf = (slot: IdempotencySlot) => [slot.scope, slot.key, slot.reservedAt];

/**
 * Aborts the batch unless this request still holds its reservation. A request
 * that failed (5xx) frees its key for a retry; a batch of its that reaches D1
 * only afterwards (its caller gave up on an answer that was still coming) must
 * not land: the retry runs the effect again, and a checkout payment or a draw
 * makes a new charge each time, so both would. D1 orders the two writes, so
 * either the batch landed first (the key is done and the retry replays it) or
 * it is refused here.
 */
const reservationHeld = (slot: IdempotencySlot): SqlStatement =>
  guard("idempotency_key_released", `EXISTS (SELECT 1 FROM idempotency_keys${STILL_RESERVED})`, ...reservationOf(slot));

/**
 * The statements that store a JSON response for `slot` inside the batch of the
 * effect it reports, so the effect and its answer commit together: a crash
 * after the batch still replays this exact answer; and that refuse the whole
 * batch if the key was freed meanwhile (`reservationHeld`). `body` is stored as
 * given: encrypt it first (`encryptSecret`) when it carries a key shown once.
 */
export const storeResponseStatements = (slot: IdempotencySlot, status: number, body: string): SqlStatement[] => [
  reservationHeld(slot),
  sqlStatement(`${STORE_RESPONSE}?${STILL_RESERVED}`, status, body, ...reservationOf(slot)),
];

/**
 * As `storeResponseStatements`, for an answer that names a figure only the batch
 * itself knows (a balance after the payment): `template` is the JSON answer with
 * `"<field>":<PENDING_FIGURE>` in that place, and the batch writes in the value
 * of `figureSql` (a scalar subquery run after the batch's own writes). The token
 * carries raw quotes, which JSON never leaves unescaped inside a string, so no
 * text a user supplied can be mistaken for it.
 */
export const storeTemplateStatements = (
  slot: IdempotencySlot,
  status: number,
  template: string,
  field: string,
  figureSql: string,
  ...figureParams: SqlStatement["params"]
): SqlStatement[] => [
  reservationHeld(slot),
  sqlStatement(
    `${STORE_RESPONSE}replace(?, ?, ? || (${figureSql}))${STILL_RESERVED}`,
    status,
    template,
    `"${field}":${PENDING_FIGURE}`,
    `"${field}":`,
    ...figureParams,
    ...reservationOf(slot),
  ),
];

/**
 * The reservation check alone, as a guard of a batch that must not land once the request's key was
 * freed (the first phase of a payment across ledger shards).
 */
export const reservationHeldStatement = reservationHeld;

/**
 * Stores `body` under `slot` only while the reservation is still held, with no guard: for a batch
 * that must land whether or not the request that began it is still waiting (a transfer completed by
 * recovery); a freed or taken-over key simply keeps no answer from it.
 */
export const storeIfHeldStatement = (slot: IdempotencySlot, status: number, body: string): SqlStatement =>
  sqlStatement(`${STORE_RESPONSE}?${STILL_RESERVED}`, status, body, ...reservationOf(slot));

/** Frees a reservation that keeps no answer: this one only (another request may have taken the key over). */
export const releaseReservation = (db: D1Database, slot: IdempotencySlot) =>
  db
    .prepare(`DELETE FROM idempotency_keys${STILL_RESERVED}`)
    .bind(...reservationOf(slot))
    .run();

/** Whether the reservation `slot` names still runs: not answered, freed or taken over (a repeat waits on it). */
export const reservationRunning = async (db: D1Database, slot: IdempotencySlot): Promise<boolean> =>
  (await db
    .prepare(`SELECT 1 AS running FROM idempotency_keys${STILL_RESERVED}`)
    .bind(...reservationOf(slot))
    .first()) !== null;

/** Stands in the template for the figure the batch writes (see `storeTemplateStatements`). */
export const PENDING_FIGURE = Number.MIN_SAFE_INTEGER;

/** Stores the answer of a request that ran, right after it; this reservation only. */
export const storeAnswer = (
  db: D1Database,
  slot: IdempotencySlot,
  status: number,
  body: string,
  contentType: string | null,
) =>
  db
    .prepare(
      `UPDATE idempotency_keys SET status = 'done', response_status = ?, response_body = ?, response_content_type = ?${STILL_RESERVED}`,
    )
    .bind(status, body, contentType, ...reservationOf(slot))
    .run();
