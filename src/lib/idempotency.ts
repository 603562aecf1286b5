import type { Context, Next } from "hono";
import type { AppEnv } from "../app-env";
import { ApiError } from "./errors";
import { sha256Hex } from "./crypto";
import { nowIso } from "./time";
import { decryptSecret, encryptSecret } from "./encryption";
import { guard, sqlStatement, type SqlStatement } from "../ledger/plan";
import { faultPoint } from "./faults";

const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;
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
 * The statements that store a create's answer in the create's own batch,
 * encrypted (it may show a key once); none when the request has no key.
 */
export async function answerInBatch(c: Context<AppEnv>, status: number, body: object): Promise<SqlStatement[]> {
  const slot = c.get("idempotency");
  if (!slot) return [];
  return storeResponseStatements(
    slot,
    status,
    await encryptSecret(c.get("settings").webhookSecretsKey, JSON.stringify(body)),
  );
}

/** Frees a reservation that keeps no answer: this one only (another request may have taken the key over). */
export const releaseReservation = (db: D1Database, slot: IdempotencySlot) =>
  db
    .prepare(`DELETE FROM idempotency_keys${STILL_RESERVED}`)
    .bind(...reservationOf(slot))
    .run();

/** Stands in the template for the figure the batch writes (see `storeTemplateStatements`). */
export const PENDING_FIGURE = Number.MIN_SAFE_INTEGER;

/**
 * Answers never kept under a key: the request failed validation (400, or 415
 * for a body not in UTF-8: the hash does not cover Content-Type, so a fixed
 * charset would get the 415 replayed) or was refused before its endpoint ran
 * (401 and 403: the credential; 429: its rate, whose Retry-After a replay
 * would not carry), so the same key runs again.
 */
const NOT_STORED: ReadonlySet<number> = new Set([400, 401, 403, 415, 429]);

/** Whether a response is the key's final answer: the endpoint ran and did not fail unexpectedly (5xx). */
const isStoredAnswer = (status: number) => status < 500 && !NOT_STORED.has(status);

/** Stored answers that carry a secret are encrypted (`v1:`); money answers are stored as JSON (they carry none). */
const storedText = (material: string, body: string) =>
  body.startsWith("v1:") ? decryptSecret(material, body) : Promise.resolve(body);

/**
 * `Idempotency-Key` on POST (Stripe semantics). The first request with a key
 * reserves it, runs, and its status and body are kept; the same key and the
 * same request replay them byte for byte with `Idempotent-Replayed: true`; the
 * same key with a different request is 409 `idempotency_key_reused`; a
 * duplicate while the first still runs is 409 `idempotency_key_in_use`. An
 * answer is kept only if the endpoint ran (Stripe's rule): a request refused
 * before it (401, 403, 429: see `NOT_STORED`), failed validation (400, 415) or failed
 * unexpectedly (5xx) keeps nothing, so it can be retried with its key. Handlers that change state store their
 * answer in the same D1 batch as the change (`c.get("idempotency")` and
 * `storeResponseStatements`), so no crash can separate the two; for the rest the
 * answer is stored right after. Keys are scoped to the credential (a hash of
 * the Authorization header) and kept 24 h.
 *
 * `requireActor` runs this once it has admitted the credential (valid now, of
 * the route's kind, within its rate limit), never before: a stored answer,
 * which may show a key once, is replayed only to the credential that keyed it
 * while that credential still works, and a refused credential gets the same
 * 401 or 403 with or without a key. Routes without a credential (x402) are
 * exactly-once by their own reservation and ignore the header.
 */
export async function idempotent(c: Context<AppEnv>, next: Next): Promise<void> {
  const key = c.req.header("idempotency-key");
  const authorization = c.req.header("authorization");
  if (c.req.method !== "POST" || key === undefined || !authorization) return next();
  if (!KEY_SHAPE.test(key)) {
    throw new ApiError(400, "invalid_request", {
      issues: [{ path: "Idempotency-Key", code: "invalid_header", message: "1 to 255 printable ASCII characters" }],
    });
  }
  const db = c.env.DB;
  const scope = await sha256Hex(`idempotency-scope:${authorization}`);
  // Read as bytes, so the JSON guard after this still sees them as sent (lib/validation.ts); decoded as
  // c.req.text() would (BOM dropped, U+FFFD for bad bytes), so the hash is the one it always was.
  const body = new TextDecoder().decode(await c.req.arrayBuffer());
  const requestHash = await sha256Hex(`${c.req.method} ${new URL(c.req.url).pathname}\n${body}`);
  const now = Date.now();
  const reserved = await db
    .prepare(
      `INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at) VALUES (?, ?, ?, 'in_progress', ?, ?)
       ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, status = 'in_progress', response_status = NULL,
         response_body = NULL, response_content_type = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
       WHERE idempotency_keys.expires_at <= excluded.created_at
          OR (idempotency_keys.status = 'in_progress' AND idempotency_keys.request_hash = excluded.request_hash AND idempotency_keys.created_at <= ?)
       RETURNING key`,
    )
    .bind(scope, key, requestHash, nowIso(now), nowIso(now + IDEMPOTENCY_TTL_MS), nowIso(now - ABANDONED_AFTER_MS))
    .first();

  if (!reserved) {
    const row = await db
      .prepare(
        "SELECT request_hash AS requestHash, status, response_status AS responseStatus, response_body AS responseBody, response_content_type AS contentType FROM idempotency_keys WHERE scope = ? AND key = ?",
      )
      .bind(scope, key)
      .first<{
        requestHash: string;
        status: string;
        responseStatus: number;
        responseBody: string;
        contentType: string | null;
      }>();
    if (!row) throw new ApiError(409, "idempotency_key_in_use");
    if (row.requestHash !== requestHash) throw new ApiError(409, "idempotency_key_reused");
    if (row.status !== "done") throw new ApiError(409, "idempotency_key_in_use");
    c.res = new Response(await storedText(c.get("settings").webhookSecretsKey, row.responseBody), {
      status: row.responseStatus,
      headers: { "content-type": row.contentType ?? "application/json", "idempotent-replayed": "true" },
    });
    return;
  }

  let stored = false;
  const slot: IdempotencySlot = { scope, key, reservedAt: nowIso(now) };
  c.set("idempotency", slot);
  try {
    await next();
    const status = c.res.status;
    // A crash here (after the effect, before the answer is stored afterwards) is what in-batch answers survive.
    faultPoint("idempotency.before_store");
    if (isStoredAnswer(status)) {
      // Encrypted at rest: a first response may carry a key shown once (a new merchant's, agent's or endpoint's).
      // An answer already stored in its effect's batch is left as it is.
      const body = await encryptSecret(c.get("settings").webhookSecretsKey, await c.res.clone().text());
      await db
        .prepare(
          `UPDATE idempotency_keys SET status = 'done', response_status = ?, response_body = ?, response_content_type = ?${STILL_RESERVED}`,
        )
        .bind(status, body, c.res.headers.get("content-type"), ...reservationOf(slot))
        .run();
      stored = true;
    }
  } finally {
    // Nothing to replay: free the key for a retry.
    if (!stored) await releaseReservation(db, slot);
  }
}
