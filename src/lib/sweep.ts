import { type DeleteStep, pagedDelete } from "./bounded-deletes";
import { MAX_WINDOW_SECONDS } from "./rate-limit";
import { nowIso } from "./time";

/**
 * Rows that outlived their use, deleted a page at a time by the minute cron (src/jobs/retention.ts)
 * so no table grows without bound: stored idempotent answers past their expiry, rate-limit counters
 * whose window is over, and revoked console sessions whose token has expired anyway (its signature
 * check refuses it before any revocation lookup). Each condition has an index (migration 0015).
 */
export function expiredRowSteps(db: D1Database, now = Date.now()): DeleteStep[] {
  const at = nowIso(now);
  return [
    pagedDelete(db, "idempotency_keys", "idempotency_keys", "expires_at <= ?", at),
    pagedDelete(db, "idempotency_claims", "idempotency_claims", "expires_at <= ?", at),
    pagedDelete(db, "rate_limits", "rate_limits", "window_start < ?", Math.floor(now / 1000) - MAX_WINDOW_SECONDS),
    pagedDelete(db, "console_revoked_sessions", "console_revoked_sessions", "expires_at <= ?", at),
  ];
}
