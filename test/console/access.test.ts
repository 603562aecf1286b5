import { base64url, generateKeyPair, importJWK, type JWTPayload, SignJWT, UnsecuredJWT } from "jose";
import { describe, expect, inject, it } from "vitest";
import { api, OPS_EMAIL } from "../helpers/api";

// Cloudflare Access sign-in (docs/api.md, Console sign-in): the Worker verifies the
// Cf-Access-Jwt-Assertion against the team's key set, which the test receiver
// serves at /access/certs (test/setup/receiver.global.ts); its private key is
// provided to the tests as accessPrivateJwk.

const ISSUER = "https://agent-pay-test.cloudflareaccess.com";
const AUDIENCE = "test-access-aud";
const KID = "test-access-key";

const accessKey = async () => (await importJWK(inject("accessPrivateJwk"), "RS256")) as CryptoKey;

interface AssertionOptions {
  claims?: JWTPayload;
  issuer?: string;
  audience?: string;
  /** Seconds from now; negative for an expired assertion. */
  expiresIn?: number;
  key?: CryptoKey;
  kid?: string;
}

async function assertion(options: AssertionOptions = {}) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ email: OPS_EMAIL, ...options.claims })
    .setProtectedHeader({ alg: "RS256", kid: options.kid ?? KID })
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt(now - 60)
    .setExpirationTime(now + (options.expiresIn ?? 300))
    .sign(options.key ?? (await accessKey()));
}

const signIn = (jwt?: string) =>
  api("POST", "/console/auth/access", { headers: jwt === undefined ? {} : { "cf-access-jwt-assertion": jwt } });

/** Replaces the payload of a signed JWT, keeping its header and signature. */
function withPayload(jwt: string, change: (claims: Record<string, unknown>) => Record<string, unknown>) {
  const [header, payload, signature] = jwt.split(".");
  const claims = JSON.parse(
    new TextDecoder().decode(
      Uint8Array.from(atob(payload!.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0)),
    ),
  );
  return `${header}.${base64url.encode(JSON.stringify(change(claims)))}.${signature}`;
}

describe("POST /console/auth/access", () => {
  it("a valid assertion for ops@example.com gives {token, expiresAt}, usable on console routes", async () => {
    const before = Date.now();
    const res = await signIn(await assertion());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), expiresAt: expect.any(String) });
    const expiresAt = Date.parse(res.body.expiresAt);
    expect(expiresAt).toBeGreaterThan(before);
    expect(expiresAt - before).toBeLessThanOrEqual(12 * 3600_000 + 1000);

    const agents = await api("GET", "/console/agents", { token: res.body.token });
    expect(agents.status).toBe(200);
    const users = await api("GET", "/console/users", { token: res.body.token });
    expect(users.status).toBe(200);
    // The session is a console session like any other: it can be signed out.
    expect((await api("POST", "/console/auth/sign-out", { token: res.body.token })).status).toBe(200);
    expect((await api("GET", "/console/agents", { token: res.body.token })).status).toBe(401);
  });

  it("the asserted e-mail is matched without regard to case", async () => {
    const res = await signIn(await assertion({ claims: { email: "OPS@Example.com" } }));
    expect(res.status).toBe(200);
    expect((await api("GET", "/console/agents", { token: res.body.token })).status).toBe(200);
  });

  it("a user added from the console may sign in through Access too", async () => {
    const email = "access-added@example.com";
    expect((await signIn(await assertion({ claims: { email } }))).status).toBe(403);
    const ops = (await signIn(await assertion())).body.token as string;
    expect((await api("POST", "/console/users", { token: ops, body: { email } })).status).toBe(201);
    const res = await signIn(await assertion({ claims: { email } }));
    expect(res.status).toBe(200);
    expect((await api("GET", "/console/agents", { token: res.body.token })).status).toBe(200);
  });

  it("401 access_assertion_required without the header", async () => {
    const res = await signIn();
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: "access_assertion_required" });
  });

  const invalid: [string, () => Promise<string>][] = [
    ["an empty header", async () => ""],
    ["a value that is not a JWT", async () => "not-a-jwt"],
    ["the wrong audience", () => assertion({ audience: "another-application-aud" })],
    ["the wrong issuer", () => assertion({ issuer: "https://someone-else.cloudflareaccess.com" })],
    ["an expired assertion", () => assertion({ expiresIn: -120 })],
    [
      "an assertion signed by another key under the same kid",
      async () => assertion({ key: (await generateKeyPair("RS256")).privateKey }),
    ],
    [
      "an assertion signed by another key under an unknown kid",
      async () => assertion({ key: (await generateKeyPair("RS256")).privateKey, kid: "not-in-the-key-set" }),
    ],
    [
      "a tampered payload (a stranger's assertion rewritten to ops@example.com)",
      async () =>
        withPayload(await assertion({ claims: { email: "visitor@example.com" } }), (c) => ({ ...c, email: OPS_EMAIL })),
    ],
    [
      "a tampered expiry (an expired assertion pushed into the future)",
      async () =>
        withPayload(await assertion({ expiresIn: -120 }), (c) => ({ ...c, exp: Math.floor(Date.now() / 1000) + 3600 })),
    ],
    [
      "an unsigned assertion (alg none)",
      async () =>
        new UnsecuredJWT({ email: OPS_EMAIL })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setIssuedAt()
          .setExpirationTime("5m")
          .encode(),
    ],
    ["an assertion without an e-mail", async () => assertion({ claims: { email: undefined } })],
  ];

  it.each(invalid)("401 access_assertion_invalid for %s", async (_name, make) => {
    const jwt = await make();
    const res = await signIn(jwt);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      error: jwt === "" ? expect.stringMatching(/^access_assertion_/) : "access_assertion_invalid",
    });
    expect(JSON.stringify(res.body)).not.toContain("token");
  });

  it("403 not_a_console_user for a valid assertion of an e-mail that may not use the console", async () => {
    const res = await signIn(await assertion({ claims: { email: "visitor@example.com" } }));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "not_a_console_user" });
  });
});
