import { expiredCountersStatement } from "./rate-limit";
import { nowIso } from "./time";

/**
 * Rows that outlived their use, deleted by the minute cron so no table grows
 * without bound: stored idempotent answers past their expiry, rate-limit
 * counters whose window is over, and revoked console sessions whose token has
 * expired anyway (its signature check refuses it before any revocation lookup).
 */
export function sweepExpiredRows(db: D1Database, now = Date.now()) {
  const at = nowIso(now);
  return db.batch([
    db.prepare("DELETE FROM idempotency_keys WHERE expires_at <= ?").bind(at),
    expiredCountersStatement(db, now),
    db.prepare("DELETE FROM console_revoked_sessions WHERE expires_at <= ?").bind(at),
  ]);
}
