import { type DeleteStep, pagedDelete } from "../lib/bounded-deletes";

/*
 * What auth keeps past its use, deleted a page at a time by the minute cron (src/jobs/retention.ts):
 * stored idempotent answers and key claims past their expiry, and revoked console sessions whose
 * token has expired anyway (its signature check refuses it before any revocation lookup). Each
 * condition has an index (migration 0015).
 */

/** Stored idempotent answers past their expiry; `name` is what the log shows when the step falls behind. */
export const expiredAnswersStep = (db: D1Database, at: string, name = "idempotency_keys"): DeleteStep =>
  pagedDelete(db, name, "idempotency_keys", "expires_at <= ?", at);

/** Idempotency-Key claims (control's) past their expiry. */
export const expiredClaimsStep = (db: D1Database, at: string): DeleteStep =>
  pagedDelete(db, "idempotency_claims", "idempotency_claims", "expires_at <= ?", at);

/** Revoked console sessions whose token has expired. */
export const expiredSessionsStep = (db: D1Database, at: string): DeleteStep =>
  pagedDelete(db, "console_revoked_sessions", "console_revoked_sessions", "expires_at <= ?", at);
