import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../app-env";
import { ApiError } from "./errors";
import { sha256Hex } from "./crypto";
import { nowIso } from "./time";
import { decryptSecret, encryptSecret } from "./encryption";

const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;
export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;
/**
 * A reservation still `in_progress` after this long lost its request (a crash
 * between the effect and storing the response). The same request may then
 * take it over and run again: every money path is guarded in its batch, so
 * running again ends in the one effect that already happened (or makes it).
 */
export const ABANDONED_AFTER_MS = 60_000;

/**
 * `Idempotency-Key` on POST (Stripe semantics). The first request with a key
 * reserves it, runs, and its status and body are kept; the same key and the
 * same request replay them byte for byte with `Idempotent-Replayed: true`; the
 * same key with a different request is 409 `idempotency_key_reused`; a
 * duplicate while the first still runs is 409 `idempotency_key_in_use`. A
 * request that failed validation (400) or failed unexpectedly (5xx) keeps
 * nothing, so it can be retried. Keys are scoped to the credential (a hash of
 * the Authorization header) and kept 24 h. Requests without a credential
 * (x402) are exactly-once by their own reservation and ignore the header.
 */
export const idempotency = createMiddleware<AppEnv>(async (c, next) => {
  const key = c.req.header("idempotency-key");
  const authorization = c.req.header("authorization");
  if (c.req.method !== "POST" || key === undefined || !authorization) return next();
  if (!KEY_SHAPE.test(key)) {
    throw new ApiError(400, "invalid_request", { issues: [{ path: "Idempotency-Key", code: "invalid_header", message: "1 to 255 printable ASCII characters" }] });
  }
  const db = c.env.DB;
  const scope = await sha256Hex(`idempotency-scope:${authorization}`);
  const requestHash = await sha256Hex(`${c.req.method} ${new URL(c.req.url).pathname}\n${await c.req.text()}`);
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
      .prepare("SELECT request_hash AS requestHash, status, response_status AS responseStatus, response_body AS responseBody, response_content_type AS contentType FROM idempotency_keys WHERE scope = ? AND key = ?")
      .bind(scope, key)
      .first<{ requestHash: string; status: string; responseStatus: number; responseBody: string; contentType: string | null }>();
    if (!row) throw new ApiError(409, "idempotency_key_in_use");
    if (row.requestHash !== requestHash) throw new ApiError(409, "idempotency_key_reused");
    if (row.status !== "done") throw new ApiError(409, "idempotency_key_in_use");
    c.res = new Response(await decryptSecret(c.get("settings").webhookSecretsKey, row.responseBody), {
      status: row.responseStatus,
      headers: { "content-type": row.contentType ?? "application/json", "idempotent-replayed": "true" },
    });
    return;
  }

  let stored = false;
  try {
    await next();
    const status = c.res.status;
    if (status !== 400 && status < 500) {
      // Encrypted at rest: a first response may carry a key shown once (a new merchant's, agent's or endpoint's).
      const body = await encryptSecret(c.get("settings").webhookSecretsKey, await c.res.clone().text());
      await db
        .prepare("UPDATE idempotency_keys SET status = 'done', response_status = ?, response_body = ?, response_content_type = ? WHERE scope = ? AND key = ?")
        .bind(status, body, c.res.headers.get("content-type"), scope, key)
        .run();
      stored = true;
    }
  } finally {
    // Nothing to replay: free the key for a retry.
    if (!stored) await db.prepare("DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status = 'in_progress'").bind(scope, key).run();
  }
});
