import { base64url, base64urlDecode } from "../lib/ids";

/** Console sessions: HS256 JWTs with `aud` = console and `exp` at most 12 h ahead (operations section 1). */
export const CONSOLE_AUDIENCE = "console";
export const MAX_SESSION_SECONDS = 12 * 3600;
const CLOCK_SKEW_SECONDS = 60;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const hmacKey = (secret: string, usage: "sign" | "verify") =>
  crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [usage]);

const encodeJson = (value: unknown) => base64url(encoder.encode(JSON.stringify(value)));

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
  const signingInput = `${encodeJson({ alg: "HS256", typ: "JWT" })}.${encodeJson({ sub: email.toLowerCase(), aud: CONSOLE_AUDIENCE, iat, exp, jti })}`;
  const signature = await crypto.subtle.sign("HMAC", await hmacKey(secret, "sign"), encoder.encode(signingInput));
  return {
    token: `${signingInput}.${base64url(new Uint8Array(signature))}`,
    expiresAt: new Date(exp * 1000).toISOString(),
  };
}

function decodeJson(part: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(decoder.decode(base64urlDecode(part)));
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/**
 * Verifies a console token. Only HS256 is accepted (never `none`, never an
 * algorithm named by the token); the signature is checked by WebCrypto's
 * constant-time verify; `aud` must be console and `exp` present, in the
 * future and no more than 12 h ahead.
 */
export async function verifyConsoleToken(
  secret: string,
  token: string,
  now = Date.now(),
): Promise<ConsoleSession | null> {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = decodeJson(headerPart);
  if (header?.alg !== "HS256" || (header.typ !== undefined && header.typ !== "JWT")) return null;
  let signature: Uint8Array;
  try {
    signature = base64urlDecode(signaturePart);
  } catch {
    return null;
  }
  const valid = await crypto.subtle.verify(
    "HMAC",
    await hmacKey(secret, "verify"),
    signature,
    encoder.encode(`${headerPart}.${payloadPart}`),
  );
  if (!valid) return null;
  const claims = decodeJson(payloadPart);
  if (!claims) return null;
  const audience = claims.aud;
  if (!(audience === CONSOLE_AUDIENCE || (Array.isArray(audience) && audience.includes(CONSOLE_AUDIENCE)))) return null;
  const nowSeconds = Math.floor(now / 1000);
  if (typeof claims.exp !== "number" || !Number.isFinite(claims.exp)) return null;
  if (claims.exp <= nowSeconds || claims.exp > nowSeconds + MAX_SESSION_SECONDS + CLOCK_SKEW_SECONDS) return null;
  if (typeof claims.sub !== "string" || !claims.sub.includes("@")) return null;
  // Tokens minted without a jti (none by this service) still verify; they just cannot be revoked one by one.
  const jti = typeof claims.jti === "string" ? claims.jti : `exp:${claims.exp}:${claims.sub}`;
  return { email: claims.sub.toLowerCase(), expiresAt: new Date(claims.exp * 1000).toISOString(), jti };
}
