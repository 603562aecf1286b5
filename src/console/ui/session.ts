import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../../auth/app-env";
import { resolveCredential } from "../../auth/credentials";
import { placementOf } from "../../ledger/place";
import { hmacSha256Hex, timingSafeEqualStrings } from "../../lib/crypto";
import { ApiError } from "../../lib/errors";
import { base64url } from "../../lib/ids";

export const SESSION_COOKIE = "console_session";
const PRE_SESSION_COOKIE = "console_presession";

const cookieOptions = { httpOnly: true, secure: true, sameSite: "Strict", path: "/" } as const;

/** The page session: the same console token the API takes, in an HttpOnly, Secure, SameSite=Strict cookie. */
export function setSessionCookie(c: Context<AppEnv>, token: string, expiresAt: string) {
  setCookie(c, SESSION_COOKIE, token, { ...cookieOptions, expires: new Date(expiresAt) });
}

export const clearSessionCookie = (c: Context<AppEnv>) => deleteCookie(c, SESSION_COOKIE, cookieOptions);

/** The CSRF token of a session: bound to the session id, so it is useless to anyone without the cookie. */
const csrfFor = (secret: string, binding: string) => hmacSha256Hex(secret, `console-csrf:${binding}`);

/** Pages that need a signed-in console user; anyone else is sent to sign in. Every POST must carry the CSRF token. */
export const requirePageSession = createMiddleware<AppEnv>(async (c, next) => {
  const token = getCookie(c, SESSION_COOKIE);
  const actor = token ? await resolveCredential(placementOf(c.env).control.db, c.get("settings"), token) : null;
  if (actor?.kind !== "console") {
    clearSessionCookie(c);
    return c.redirect("/console/sign-in", 303);
  }
  c.set("actor", actor);
  const csrf = await csrfFor(c.get("settings").consoleSessionSecret, actor.jti ?? token!);
  c.set("csrf", csrf);
  if (c.req.method === "POST") {
    const body = await parseForm(c);
    if (typeof body._csrf !== "string" || !(await timingSafeEqualStrings(body._csrf, csrf))) throw CSRF_REFUSED;
  }
  await next();
});

/**
 * Before sign-in there is no session to bind to: a random pre-session cookie
 * carries the binding instead (double submit), so a cross-site form cannot
 * start or finish a sign-in in someone's browser.
 */
export async function preSessionCsrf(c: Context<AppEnv>): Promise<string> {
  let binding = getCookie(c, PRE_SESSION_COOKIE);
  if (!binding) {
    binding = base64url(crypto.getRandomValues(new Uint8Array(16)));
    setCookie(c, PRE_SESSION_COOKIE, binding, { ...cookieOptions, maxAge: 3600 });
  }
  return csrfFor(c.get("settings").consoleSessionSecret, `pre:${binding}`);
}

export const CSRF_REFUSED = new ApiError(403, "csrf_token_invalid");

/** A form body; a malformed one (a multipart body without its boundary, say) is a 400, not a crash. */
export async function parseForm(
  c: Context<AppEnv>,
  options?: { all: boolean },
): Promise<Record<string, string | File | (string | File)[]>> {
  try {
    return await c.req.parseBody(options);
  } catch {
    throw new ApiError(400, "invalid_request", {
      issues: [{ path: "", code: "malformed", message: "the form body could not be read" }],
    });
  }
}

export async function checkPreSessionCsrf(c: Context<AppEnv>, submitted: unknown): Promise<boolean> {
  const binding = getCookie(c, PRE_SESSION_COOKIE);
  if (!binding || typeof submitted !== "string") return false;
  return timingSafeEqualStrings(submitted, await csrfFor(c.get("settings").consoleSessionSecret, `pre:${binding}`));
}
