import type { Settings } from "../config/env";
import type { consoleUsers } from "../db/schema";

/*
 * The console's people: users added from the console (beside the configured CONSOLE_USERS) and
 * sessions ended by sign-out before their expiry.
 */

export type AddedConsoleUser = typeof consoleUsers.$inferSelect;

/** The console users added from the console (the configured CONSOLE_USERS are in the settings). */
export async function listAddedConsoleUsers(db: D1Database): Promise<AddedConsoleUser[]> {
  const rows = await db
    .prepare("SELECT email, added_by AS addedBy, created_at AS createdAt FROM console_users")
    .all<AddedConsoleUser>();
  return rows.results;
}

/** Lets another e-mail sign in; adding one already there changes nothing. */
export async function addConsoleUser(db: D1Database, user: AddedConsoleUser): Promise<void> {
  await db
    .prepare("INSERT INTO console_users (email, added_by, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
    .bind(user.email, user.addedBy, user.createdAt)
    .run();
}

/** A console user is in CONSOLE_USERS or was added from the console. */
export async function isConsoleUser(db: D1Database, settings: Settings, email: string): Promise<boolean> {
  const normalized = email.trim().toLowerCase();
  if (settings.consoleUsers.includes(normalized)) return true;
  const row = await db.prepare("SELECT email FROM console_users WHERE email = ?").bind(normalized).first();
  return row !== null;
}

/** Whether the session `jti` was ended by sign-out (and its token has not expired since). */
export async function isRevokedSession(db: D1Database, jti: string): Promise<boolean> {
  const row = await db.prepare("SELECT jti FROM console_revoked_sessions WHERE jti = ?").bind(jti).first();
  return row !== null;
}

/** Ends a session before its expiry: its id is remembered until the token would have expired anyway. */
export async function revokeConsoleSession(db: D1Database, jti: string, expiresAt: string, at: string): Promise<void> {
  await db
    .prepare(
      "INSERT INTO console_revoked_sessions (jti, expires_at, revoked_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING",
    )
    .bind(jti, expiresAt, at)
    .run();
}
