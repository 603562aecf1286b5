import { type DeleteStep, pagedDelete } from "./bounded-deletes";
import { ApiError } from "./errors";

/** The longest window a stored counter may have: the minute cron deletes counters whose window ended before that. */
export const MAX_WINDOW_SECONDS = 86_400;

/**
 * A fixed-window counter in D1, one statement per hit (atomic in D1), for
 * low-volume abuse limits such as sign-in attempts. Returns how many seconds
 * to wait when the limit is exceeded, else null.
 */
export async function hitRateLimit(
  db: D1Database,
  key: string,
  limit: number,
  windowSeconds: number,
  now = Date.now(),
): Promise<number | null> {
  if (windowSeconds > MAX_WINDOW_SECONDS) throw new Error(`a rate-limit window is at most ${MAX_WINDOW_SECONDS} s`);
  const windowStart = Math.floor(now / 1000 / windowSeconds) * windowSeconds;
  const row = await db
    .prepare(
      `INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, 1)
       ON CONFLICT (key) DO UPDATE SET
         count = CASE WHEN rate_limits.window_start = excluded.window_start THEN rate_limits.count + 1 ELSE 1 END,
         window_start = excluded.window_start
       RETURNING count`,
    )
    .bind(key, windowStart)
    .first<{ count: number }>();
  if ((row?.count ?? 0) <= limit) return null;
  return Math.max(1, windowStart + windowSeconds - Math.floor(now / 1000));
}

/** Counters whose window ended before the longest window could still count them, for the minute cron. */
export const expiredRateLimitsStep = (db: D1Database, now: number): DeleteStep =>
  pagedDelete(db, "rate_limits", "rate_limits", "window_start < ?", Math.floor(now / 1000) - MAX_WINDOW_SECONDS);

/** The window of the platform rate limit bindings (wrangler.toml `period`). */
export const RATE_LIMIT_PERIOD_SECONDS = 10;

/**
 * Checks a platform rate limit binding (per credential or per client address);
 * 429 with Retry-After when it is exceeded. A missing binding limits nothing.
 */
export async function enforceRateLimit(binding: RateLimit | undefined, key: string): Promise<void> {
  if (!binding) return;
  const { success } = await binding.limit({ key });
  if (!success) throw new ApiError(429, "too_many_requests", {}, { "Retry-After": String(RATE_LIMIT_PERIOD_SECONDS) });
}
