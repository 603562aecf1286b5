import { describe, expect, it } from "vitest";
import { MAX_SESSION_SECONDS, signConsoleToken, verifyConsoleToken } from "../../src/auth/jwt";
import { b64url, HS256, makeJwt } from "../helpers/auth-matrix";

const SECRET = "unit-test-console-session-secret-0123456789abcdef";
const NOW = Date.UTC(2026, 4, 1, 12, 0, 0);
const NOW_S = Math.floor(NOW / 1000);

const claims = (overrides: Record<string, unknown> = {}) => ({
  sub: "ops@example.com",
  aud: "console",
  iat: NOW_S,
  exp: NOW_S + 3600,
  ...overrides,
});
const sign = (
  payload: Record<string, unknown>,
  header: Record<string, unknown> = HS256,
  secret: string | null = SECRET,
) => makeJwt(header, payload, secret);
const verify = (token: string) => verifyConsoleToken(SECRET, token, NOW);

describe("verifyConsoleToken", () => {
  it("accepts a token from signConsoleToken and returns the e-mail and expiry", async () => {
    const { token, expiresAt } = await signConsoleToken(SECRET, "Ops@Example.com", 3600, NOW);
    expect(token.split(".")).toHaveLength(3);
    expect(expiresAt).toBe(new Date((NOW_S + 3600) * 1000).toISOString());
    expect(await verify(token)).toEqual({
      email: "ops@example.com",
      expiresAt,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
    });
  });

  it("gives every session its own id, by which sign-out revokes it", async () => {
    const a = await verify((await signConsoleToken(SECRET, "ops@example.com", 3600, NOW)).token);
    const b = await verify((await signConsoleToken(SECRET, "ops@example.com", 3600, NOW)).token);
    expect(a!.jti).not.toBe(b!.jti);
  });

  it("accepts a hand-built HS256 token with the right secret", async () => {
    const session = await verify(await sign(claims()));
    expect(session).toMatchObject({
      email: "ops@example.com",
      expiresAt: new Date((NOW_S + 3600) * 1000).toISOString(),
    });
  });

  it("rejects a token whose payload was tampered with", async () => {
    const token = await sign(claims());
    const [header, , signature] = token.split(".");
    const forged = `${header}.${b64url(JSON.stringify(claims({ sub: "admin@example.com" })))}.${signature}`;
    expect(await verify(forged)).toBeNull();
    const longer = `${header}.${b64url(JSON.stringify(claims({ exp: NOW_S + 7200 })))}.${signature}`;
    expect(await verify(longer)).toBeNull();
  });

  it("rejects a token whose signature was tampered with", async () => {
    const token = await sign(claims());
    const flipped = token.slice(0, -2) + (token.endsWith("AA") ? "BB" : "AA");
    expect(await verify(flipped)).toBeNull();
    const [header, payload] = token.split(".");
    expect(await verify(`${header}.${payload}.`)).toBeNull();
  });

  it("rejects a token signed with another secret", async () => {
    expect(await verify(await sign(claims(), HS256, "another-secret-that-is-long-enough-0123456789"))).toBeNull();
    const { token } = await signConsoleToken(
      "another-secret-that-is-long-enough-0123456789",
      "ops@example.com",
      3600,
      NOW,
    );
    expect(await verify(token)).toBeNull();
  });

  it("rejects alg none, with or without a signature", async () => {
    expect(await verify(await sign(claims(), { alg: "none", typ: "JWT" }, null))).toBeNull();
    expect(await verify(await sign(claims(), { alg: "none" }, null))).toBeNull();
    expect(await verify(await sign(claims(), { alg: "NONE", typ: "JWT" }, null))).toBeNull();
    // Even carrying a valid HMAC over the content, a token that names `none` is refused.
    expect(await verify(await sign(claims(), { alg: "none", typ: "JWT" }))).toBeNull();
  });

  it("rejects other algorithms named in the header (HS512, RS256, HS384)", async () => {
    for (const alg of ["HS512", "RS256", "HS384", "ES256", "hs256"]) {
      // The signature is a valid HMAC-SHA256: only the header's `alg` differs.
      expect(await verify(await sign(claims(), { alg, typ: "JWT" })), alg).toBeNull();
    }
    // A genuine HS512 signature with the right secret is refused too.
    const signingInput = `${b64url(JSON.stringify({ alg: "HS512", typ: "JWT" }))}.${b64url(JSON.stringify(claims()))}`;
    const key = await crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(SECRET),
      { name: "HMAC", hash: "SHA-512" },
      false,
      ["sign"],
    );
    const sig = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(signingInput)));
    expect(await verify(`${signingInput}.${b64url(sig)}`)).toBeNull();
  });

  it("rejects a token without exp or with a non-numeric exp", async () => {
    const { exp: _omit, ...noExp } = claims();
    expect(await verify(await sign(noExp))).toBeNull();
    expect(await verify(await sign(claims({ exp: String(NOW_S + 3600) })))).toBeNull();
    expect(await verify(await sign(claims({ exp: null })))).toBeNull();
  });

  it("rejects a token whose exp has passed (or is now)", async () => {
    expect(await verify(await sign(claims({ iat: NOW_S - 7200, exp: NOW_S - 1 })))).toBeNull();
    expect(await verify(await sign(claims({ iat: NOW_S - 7200, exp: NOW_S })))).toBeNull();
    // The same token verifies before its expiry and not after it.
    const { token } = await signConsoleToken(SECRET, "ops@example.com", 600, NOW);
    expect(await verifyConsoleToken(SECRET, token, NOW + 599_000)).not.toBeNull();
    expect(await verifyConsoleToken(SECRET, token, NOW + 600_000)).toBeNull();
  });

  it("rejects exp more than 12 h ahead but accepts exactly 12 h", async () => {
    expect(await verify(await sign(claims({ exp: NOW_S + MAX_SESSION_SECONDS })))).not.toBeNull();
    expect(await verify(await sign(claims({ exp: NOW_S + 13 * 3600 })))).toBeNull();
    expect(await verify(await sign(claims({ exp: NOW_S + 365 * 24 * 3600 })))).toBeNull();
  });

  it("signConsoleToken never issues a session longer than 12 h", async () => {
    const { token, expiresAt } = await signConsoleToken(SECRET, "ops@example.com", 7 * 24 * 3600, NOW);
    expect(Date.parse(expiresAt) - NOW).toBe(MAX_SESSION_SECONDS * 1000);
    expect(await verify(token)).not.toBeNull();
  });

  it("rejects a wrong or missing audience", async () => {
    expect(await verify(await sign(claims({ aud: "merchant" })))).toBeNull();
    expect(await verify(await sign(claims({ aud: "Console" })))).toBeNull();
    expect(await verify(await sign(claims({ aud: ["merchant", "agent"] })))).toBeNull();
    const { aud: _omit, ...noAud } = claims();
    expect(await verify(await sign(noAud))).toBeNull();
  });

  it("accepts an aud array that contains console", async () => {
    const session = await verify(await sign(claims({ aud: ["other-service", "console"] })));
    expect(session?.email).toBe("ops@example.com");
  });

  it("rejects a token without a usable subject", async () => {
    const { sub: _omit, ...noSub } = claims();
    expect(await verify(await sign(noSub))).toBeNull();
    expect(await verify(await sign(claims({ sub: "not-an-email" })))).toBeNull();
  });

  it("rejects tokens that are not three base64url JSON parts", async () => {
    for (const token of ["", "abc", "a.b", "a.b.c.d", "!!!.???.***", `${b64url("not json")}.${b64url("{}")}.`]) {
      expect(await verify(token), JSON.stringify(token)).toBeNull();
    }
  });
});
