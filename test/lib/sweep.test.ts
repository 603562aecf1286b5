import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { expiredRowSteps } from "../../src/jobs/retention";
import { deleteInPages } from "../../src/lib/bounded-deletes";
import { MAX_WINDOW_SECONDS } from "../../src/lib/rate-limit";

// The minute cron's sweep: tables that would otherwise grow without bound lose only rows nothing reads again.

const iso = (ms: number) => new Date(ms).toISOString();
const has = async (sql: string, ...params: unknown[]) =>
  (await env.DB.prepare(sql)
    .bind(...params)
    .first()) !== null;

describe("expiredRowSteps", () => {
  it("deletes expired idempotent answers and key claims, finished rate-limit windows and revoked sessions past their expiry; keeps the rest", async () => {
    const now = Date.now();
    const nowSeconds = Math.floor(now / 1000);
    const tag = crypto.randomUUID();
    await env.DB.batch([
      ...[
        ["old", now - 1000],
        ["live", now + 3_600_000],
      ].map(([name, expires]) =>
        env.DB.prepare(
          "INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at, expires_at) VALUES (?, ?, 'h', 'done', ?, ?)",
        ).bind(`sweep-${tag}`, name, iso(now - 7_200_000), iso(expires as number)),
      ),
      ...[
        ["old", now - 1000],
        ["live", now + 3_600_000],
      ].map(([name, expires]) =>
        env.DB.prepare(
          "INSERT INTO idempotency_claims (scope, key, request_hash, expires_at) VALUES (?, ?, 'h', ?)",
        ).bind(`sweep-${tag}`, name, iso(expires as number)),
      ),
      env.DB.prepare("INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, 3)").bind(
        `sweep-${tag}-old`,
        nowSeconds - MAX_WINDOW_SECONDS - 1,
      ),
      env.DB.prepare("INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, 3)").bind(
        `sweep-${tag}-live`,
        nowSeconds - 900,
      ),
      env.DB.prepare("INSERT INTO console_revoked_sessions (jti, expires_at, revoked_at) VALUES (?, ?, ?)").bind(
        `sweep-${tag}-old`,
        iso(now - 1000),
        iso(now - 7_200_000),
      ),
      env.DB.prepare("INSERT INTO console_revoked_sessions (jti, expires_at, revoked_at) VALUES (?, ?, ?)").bind(
        `sweep-${tag}-live`,
        iso(now + 3_600_000),
        iso(now),
      ),
    ]);

    const run = await deleteInPages(expiredRowSteps(env.DB, now), { limit: 500, budgetMs: 60_000 });
    expect(run.unfinished).toEqual([]);

    expect(await has("SELECT 1 FROM idempotency_keys WHERE scope = ? AND key = 'old'", `sweep-${tag}`)).toBe(false);
    expect(await has("SELECT 1 FROM idempotency_keys WHERE scope = ? AND key = 'live'", `sweep-${tag}`)).toBe(true);
    expect(await has("SELECT 1 FROM idempotency_claims WHERE scope = ? AND key = 'old'", `sweep-${tag}`)).toBe(false);
    expect(await has("SELECT 1 FROM idempotency_claims WHERE scope = ? AND key = 'live'", `sweep-${tag}`)).toBe(true);
    expect(await has("SELECT 1 FROM rate_limits WHERE key = ?", `sweep-${tag}-old`)).toBe(false);
    expect(await has("SELECT 1 FROM rate_limits WHERE key = ?", `sweep-${tag}-live`)).toBe(true);
    expect(await has("SELECT 1 FROM console_revoked_sessions WHERE jti = ?", `sweep-${tag}-old`)).toBe(false);
    expect(await has("SELECT 1 FROM console_revoked_sessions WHERE jti = ?", `sweep-${tag}-live`)).toBe(true);
  });
});
