import { createRemoteJWKSet, jwtVerify } from "jose";
import type { Settings } from "../config/env";

const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

/**
 * Verifies a Cloudflare Access assertion (`Cf-Access-Jwt-Assertion`) against
 * the team's published keys: signature, issuer (the team domain), audience
 * (the application's AUD tag) and expiry. Returns the e-mail it asserts.
 */
export async function verifyAccessAssertion(
  access: NonNullable<Settings["access"]>,
  assertion: string,
): Promise<string | null> {
  let jwks = keySets.get(access.certsUrl);
  if (!jwks) {
    jwks = createRemoteJWKSet(new URL(access.certsUrl));
    keySets.set(access.certsUrl, jwks);
  }
  try {
    const { payload } = await jwtVerify(assertion, jwks, {
      issuer: `https://${access.teamDomain}`,
      audience: access.audience,
      algorithms: ["RS256", "ES256"],
    });
    return typeof payload.email === "string" ? payload.email.toLowerCase() : null;
  } catch {
    return null;
  }
}
