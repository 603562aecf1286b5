import { exportJWK, generateKeyPair, importJWK, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { inject } from "vitest";
import { api } from "../helpers/api";

const ISSUER = "https://agent-pay-test.cloudflareaccess.com";
const AUDIENCE = "test-access-aud";

async function assertion(claims: Record<string, unknown> = {}, options: { issuer?: string; audience?: string; expiresIn?: string; key?: CryptoKey } = {}) {
  const key = options.key ?? ((await importJWK(inject("accessPrivateJwk"), "RS256")) as CryptoKey);
  return new SignJWT({ email: "ops@example.com", ...claims })
    .setProtectedHeader({ alg: "RS256", kid: "test-access-key" })
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? "5m")
    .sign(key);
}

const signIn = (jwt?: string) => api("POST", "/console/auth/access", { headers: jwt ? { "cf-access-jwt-assertion": jwt } : {} });

describe("Cloudflare Access sign-in", () => {
  it("a valid assertion for an allowed e-mail gives a console session", async () => {
    const res = await signIn(await assertion());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), expiresAt: expect.any(String) });
    expect((await api("GET", "/console/agents", { token: res.body.token })).status).toBe(200);
  });

  it("401 for a missing, wrong-audience, wrong-issuer, expired, foreign-key or tampered assertion", async () => {
    const other = await generateKeyPair("RS256");
    const good = await assertion();
    const [h, p, s] = good.split(".");
    const tampered = `${h}.${btoa(JSON.stringify({ ...JSON.parse(atob(p!.replace(/-/g, "+").replace(/_/g, "/"))), email: "ceo@example.com" })).replace(/=+$/, "")}.${s}`;
    const cases = [
      await signIn(),
      await signIn(await assertion({}, { audience: "another-app" })),
      await signIn(await assertion({}, { issuer: "https://evil.cloudflareaccess.com" })),
      await signIn(await assertion({}, { expiresIn: "-1m" })),
      await signIn(await assertion({}, { key: other.privateKey })),
      await signIn(tampered),
    ];
    expect(cases.map((r) => r.status)).toEqual([401, 401, 401, 401, 401, 401]);
    expect(await exportJWK(other.publicKey)).toHaveProperty("n");
  });

  it("403 not_a_console_user for a valid assertion of another e-mail", async () => {
    const res = await signIn(await assertion({ email: "visitor@example.com" }));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "not_a_console_user" });
  });
});
