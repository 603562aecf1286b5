import { jwtVerify, SignJWT } from "jose";
import { base64url } from "../lib/ids";

/**
 * Console sessions: HS256 JWTs signed with CONSOLE_SESSION_SECRET, `aud` =
 * console, `exp` at most 12 h ahead (docs/decisions.md, "Console and credentials").
 */
export const CONSOLE_AUDIENCE = "console";
export const MAX_SESSION_SECONDS = 12 * 3600;
/** Slack on the 12 h cap only, for a token minted by an instance whose clock is slightly ahead. */
const CLOCK_SKEW_SECONDS = 60;

const encoder = new TextEncoder();

export interface ConsoleSession {
  email: string;
  expiresAt: string;
  /** The session's id, by which sign-out revokes it. */
  jti: string;
}

/** Signs a console session token for `email`, valid `ttlSeconds` (at most 12 h). */
export async function signConsoleToken(
  secret: string,
  email: string,
  ttlSeconds = MAX_SESSION_SECONDS,
  now = Date.now(),
): Promise<{ token: string; expiresAt: string }> {
  const iat = Math.floor(now / 1000);
  const exp = iat + Math.min(ttlSeconds, MAX_SESSION_SECONDS);
  const jti = base64url(crypto.getRandomValues(new Uint8Array(16)));
  const token = await new SignJWT({ sub: email.toLowerCase(), aud: CONSOLE_AUDIENCE, iat, exp, jti })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .sign(encoder.encode(secret));
  return { token, expiresAt: new Date(exp * 1000).toISOString() };
}

/**
 * Verifies a console token. Only HS256 is accepted (never `none`, never an
 * algorithm the token names); `aud` must include console; `exp` must be
 * present, in the future (no tolerance) and no more than 12 h ahead; `sub` an
 * e-mail address. Anything else, malformed tokens included, is no session.
 */
export async function verifyConsoleToken(
  secret: string,
  token: string,
  now = Date.now(),
): Promise<ConsoleSession | null> {
  let verified: Awaited<ReturnType<typeof jwtVerify>>;
  try {
    verified = await jwtVerify(token, encoder.encode(secret), {
      algorithms: ["HS256"],
      audience: CONSOLE_AUDIENCE,
      requiredClaims: ["exp"],
      currentDate: new Date(now),
    });
  } catch {
    return null;
  }
  const { payload: claims, protectedHeader } = verified;
  if (protectedHeader.typ !== undefined && protectedHeader.typ !== "JWT") return null;
  const exp = claims.exp!;
  if (exp > Math.floor(now / 1000) + MAX_SESSION_SECONDS + CLOCK_SKEW_SECONDS) return null;
  if (typeof claims.sub !== "string" || !claims.sub.includes("@")) return null;
  // Tokens minted without a jti (none by this service) still verify; they just cannot be revoked one by one.
  const jti = typeof claims.jti === "string" ? claims.jti : `exp:${exp}:${claims.sub}`;
  return { email: claims.sub.toLowerCase(), expiresAt: new Date(exp * 1000).toISOString(), jti };
}
