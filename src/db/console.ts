import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** Console users added from the console, beside the configured CONSOLE_USERS. */
export const consoleUsers = sqliteTable("console_users", {
  email: text("email").primaryKey(),
  addedBy: text("added_by").notNull(),
  createdAt: text("created_at").notNull(),
});

/** Operator-added KYT blocklist entries (the built-in OFAC list ships in code). */
export const kytBlocklist = sqliteTable("kyt_blocklist", {
  /** Lower-case 0x address. */
  address: text("address").primaryKey(),
  reason: text("reason").notNull(),
  addedBy: text("added_by").notNull(),
  createdAt: text("created_at").notNull(),
});

/** One pending e-mail sign-in code per address; only an HMAC of the code is stored. */
export const consoleLoginCodes = sqliteTable("console_login_codes", {
  email: text("email").primaryKey(),
  codeHash: text("code_hash").notNull(),
  attempts: integer("attempts").notNull().default(0),
  expiresAt: text("expires_at").notNull(),
  consumedAt: text("consumed_at"),
  createdAt: text("created_at").notNull(),
});

/** Sessions ended by sign-out before their expiry (by the token's `jti`). */
export const consoleRevokedSessions = sqliteTable(
  "console_revoked_sessions",
  {
    jti: text("jti").primaryKey(),
    expiresAt: text("expires_at").notNull(),
    revokedAt: text("revoked_at").notNull(),
  },
  // The cron deletes expired ones a page at a time (src/auth/retention.ts).
  (t) => [index("console_revoked_sessions_expires").on(t.expiresAt)],
);

/** Fixed-window request counters for rate limits (key = purpose + subject). */
export const rateLimits = sqliteTable(
  "rate_limits",
  {
    key: text("key").primaryKey(),
    windowStart: integer("window_start").notNull(),
    count: integer("count").notNull(),
  },
  (t) => [index("rate_limits_window").on(t.windowStart)],
);

/**
 * Idempotency-Key records (Stripe semantics): scoped to the credential (a
 * hash of it), bound to a hash of the request, holding the first response to
 * replay. Kept at least 24 h.
 */
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    scope: text("scope").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    /** `in_progress` or `done`. */
    status: text("status").notNull(),
    responseStatus: integer("response_status"),
    responseBody: text("response_body"),
    responseContentType: text("response_content_type"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.scope, t.key] }), index("idempotency_keys_expires").on(t.expiresAt)],
);

/**
 * With more than one ledger shard, a keyed request's reservation (`idempotency_keys`) lives in the
 * shard its request routes to, which the request's own body or path may choose. Control keeps which
 * request each key belongs to, so the same key on another request is refused wherever it routes.
 */
export const idempotencyClaims = sqliteTable(
  "idempotency_claims",
  {
    scope: text("scope").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.scope, t.key] }), index("idempotency_claims_expires").on(t.expiresAt)],
);
