import { isConsoleUser, revokeConsoleSession } from "../auth/console-users";
import { signConsoleToken } from "../auth/jwt";
import type { Env, Settings } from "../config/env";
import { placementOf } from "../ledger/place";
import { hmacSha256Hex, timingSafeEqualStrings } from "../lib/crypto";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { sendMail } from "./mail";

export const CODE_TTL_MS = 10 * 60_000;
export const MAX_CODE_ATTEMPTS = 5;

/** Six uniformly random digits. */
function sixDigitCode(): string {
  const limit = 4_294_000_000; // the largest multiple of 1,000,000 below 2^32: no modulo bias
  for (;;) {
    const [n] = crypto.getRandomValues(new Uint32Array(1));
    if (n! < limit) return String(n! % 1_000_000).padStart(6, "0");
  }
}

/** Keyed with the session secret, so a leaked table does not give the codes up to a 10^6 brute force. */
const codeHash = (settings: Settings, email: string, code: string) =>
  hmacSha256Hex(settings.consoleSessionSecret, `console-code:${email}:${code}`);

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/**
 * Starts an e-mail sign-in. For an allowed address, a new code replaces any
 * earlier one and is mailed; for any other address nothing is stored or sent.
 * The caller answers the same either way. The mail goes out after the answer
 * (`afterAnswer`, the request's waitUntil): an answer that waited for the mail
 * API, or failed with it, would tell an allowed address from any other.
 */
export async function startEmailSignIn(
  env: Env,
  settings: Settings,
  rawEmail: string,
  afterAnswer: (work: Promise<void>) => void,
  now = Date.now(),
): Promise<void> {
  const email = normalizeEmail(rawEmail);
  const control = placementOf(env).control.db;
  if (!(await isConsoleUser(control, settings, email))) return;
  const code = sixDigitCode();
  await control
    .prepare(
      `INSERT INTO console_login_codes (email, code_hash, attempts, expires_at, consumed_at, created_at) VALUES (?, ?, 0, ?, NULL, ?)
     ON CONFLICT (email) DO UPDATE SET code_hash = excluded.code_hash, attempts = 0, expires_at = excluded.expires_at, consumed_at = NULL, created_at = excluded.created_at`,
    )
    .bind(email, await codeHash(settings, email, code), nowIso(now + CODE_TTL_MS), nowIso(now))
    .run();
  const mailing = sendMail(env, settings, {
    to: email,
    subject: "Your console sign-in code",
    text: `Your sign-in code is ${code}. It is valid for 10 minutes and can be used once.`,
  });
  // Never the mail itself (it holds the code): only that it failed.
  afterAnswer(mailing.catch((error) => log.error("console_mail", { error })));
}

/**
 * Checks a code: it must be the latest for the address, unexpired, unused and
 * within 5 tries; a wrong code spends a try. A right one is consumed (single
 * use) and exchanged for a session token.
 */
export async function verifyEmailSignIn(
  env: Env,
  settings: Settings,
  rawEmail: string,
  code: string,
  now = Date.now(),
): Promise<{ token: string; expiresAt: string } | null> {
  const email = normalizeEmail(rawEmail);
  const control = placementOf(env).control.db;
  const row = await control
    .prepare(
      "SELECT code_hash AS codeHash, attempts, expires_at AS expiresAt, consumed_at AS consumedAt FROM console_login_codes WHERE email = ?",
    )
    .bind(email)
    .first<{ codeHash: string; attempts: number; expiresAt: string; consumedAt: string | null }>();
  const at = nowIso(now);
  if (!row || row.consumedAt || row.expiresAt <= at || row.attempts >= MAX_CODE_ATTEMPTS) return null;
  const matches = await timingSafeEqualStrings(await codeHash(settings, email, code), row.codeHash);
  if (!matches) {
    await control
      .prepare("UPDATE console_login_codes SET attempts = attempts + 1 WHERE email = ? AND consumed_at IS NULL")
      .bind(email)
      .run();
    return null;
  }
  // Consume it in one guarded statement: of two requests racing with the right code, one wins.
  const consumed = await control
    .prepare(
      "UPDATE console_login_codes SET consumed_at = ? WHERE email = ? AND code_hash = ? AND consumed_at IS NULL AND attempts < ? AND expires_at > ?",
    )
    .bind(at, email, row.codeHash, MAX_CODE_ATTEMPTS, at)
    .run();
  if (consumed.meta.changes !== 1) return null;
  if (!(await isConsoleUser(control, settings, email))) return null;
  return signConsoleToken(settings.consoleSessionSecret, email);
}

/** Ends a session before its expiry: its id is remembered until the token would have expired anyway. */
export const revokeSession = (env: Env, jti: string, expiresAt: string): Promise<void> =>
  revokeConsoleSession(placementOf(env).control.db, jti, expiresAt, nowIso());
