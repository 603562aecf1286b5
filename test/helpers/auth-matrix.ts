import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { signConsoleToken } from "../../src/auth/jwt";
import { consoleToken } from "./api";
import { callWorker } from "./direct";
import { createAgent, createMerchant } from "./factories";

export type CredentialKind = "merchant" | "agent" | "console";

export interface RouteDescriptor {
  method: string;
  path: string;
  expects: CredentialKind;
  body?: unknown;
}

/** The 401 body's `error` for each expected credential kind (docs/api.md, Credentials). */
export const REQUIRED_ERROR: Record<CredentialKind, string> = {
  merchant: "merchant_api_key_required",
  agent: "agent_api_key_required",
  console: "console_session_required",
};

const encoder = new TextEncoder();

export function b64url(bytes: Uint8Array | string): string {
  const data = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
  let binary = "";
  for (const byte of data) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** 43 random base64url characters, the shape of a real API key's secret part. */
export function randomKeyBody(): string {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

export const consoleSecret = (): string => env.CONSOLE_SESSION_SECRET!;

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * Builds a JWT by hand. `secret` null leaves the signature empty (for `alg: none`);
 * the signature is always HMAC-SHA256, whatever the header claims.
 */
export async function makeJwt(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  secret: string | null = consoleSecret(),
): Promise<string> {
  const signingInput = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  if (secret === null) return `${signingInput}.`;
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const signature = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(signingInput)));
  return `${signingInput}.${b64url(signature)}`;
}

/** Claims of an otherwise valid console session for the allowed console user. */
export const validClaims = (overrides: Record<string, unknown> = {}) => {
  const iat = nowSeconds();
  return { sub: "ops@example.com", aud: "console", iat, exp: iat + 3600, ...overrides };
};

export const HS256 = { alg: "HS256", typ: "JWT" };

/** Well-formed credentials that must not be accepted anywhere. */
export async function invalidCredentials(): Promise<Record<string, string>> {
  return {
    "unknown merchant key": `sk_mch_${randomKeyBody()}`,
    "unknown agent key": `svc_sk_${randomKeyBody()}`,
    "JWT signed with the wrong secret": await makeJwt(
      HS256,
      validClaims(),
      "not-the-console-session-secret-0123456789abcdef",
    ),
    "expired JWT": await makeJwt(HS256, validClaims({ iat: nowSeconds() - 7200, exp: nowSeconds() - 3600 })),
    "alg none JWT": await makeJwt({ alg: "none", typ: "JWT" }, validClaims(), null),
    "wrong-audience JWT": await makeJwt(HS256, validClaims({ aud: "merchant" })),
    "console token for an e-mail not in CONSOLE_USERS": (
      await signConsoleToken(consoleSecret(), "intruder@example.com")
    ).token,
  };
}

let keyCache: Promise<{ merchant: string; agent: string }> | undefined;

/**
 * One real credential of each kind, created through the API. The keys are
 * cached per test file; the console token is fresh each time, since a route
 * under test may end its session (sign-out).
 */
export async function validCredentials(): Promise<Record<CredentialKind, string>> {
  keyCache ??= (async () => {
    const merchant = await createMerchant({ name: "Auth Matrix Merchant" });
    const agent = await createAgent({ name: "auth-matrix-agent" });
    return { merchant: merchant.apiKey, agent: agent.apiKey };
  })();
  return { ...(await keyCache), console: await consoleToken() };
}

const describeRoute = (route: RouteDescriptor) => `${route.method} ${route.path}`;

/**
 * Checks the credential matrix of one route: missing, malformed and invalid
 * credentials get 401 naming the expected kind; a valid credential of another
 * kind gets 403 `credential_not_allowed`; a valid credential of the expected
 * kind gets past authentication.
 */
export async function expectAuthMatrix(route: RouteDescriptor): Promise<void> {
  const expectedError = REQUIRED_ERROR[route.expects];
  const send = (headers: Record<string, string>) => callWorker(route.method, route.path, { headers, body: route.body });

  const unauthorized: [string, Record<string, string>][] = [
    ["no Authorization header", {}],
    ["Basic scheme", { authorization: "Basic x" }],
    ["Bearer without a credential", { authorization: "Bearer" }],
    ["Bearer with only a space", { authorization: "Bearer " }],
    ["empty Authorization header", { authorization: "" }],
    ["key shape too short", { authorization: "Bearer sk_mch_short" }],
  ];
  for (const [label, token] of Object.entries(await invalidCredentials())) {
    unauthorized.push([label, { authorization: `Bearer ${token}` }]);
  }

  for (const [label, headers] of unauthorized) {
    const res = await send(headers);
    expect(res.status, `${describeRoute(route)} with ${label}: ${res.text}`).toBe(401);
    expect(res.body?.error, `${describeRoute(route)} with ${label}`).toBe(expectedError);
  }

  const valid = await validCredentials();
  for (const kind of ["merchant", "agent", "console"] as const) {
    const res = await send({ authorization: `Bearer ${valid[kind]}` });
    if (kind === route.expects) {
      expect(
        [401, 403],
        `${describeRoute(route)} with a valid ${kind} credential must pass authentication: ${res.status} ${res.text}`,
      ).not.toContain(res.status);
      expect(res.status, `${describeRoute(route)} with a valid ${kind} credential: ${res.text}`).toBeLessThan(500);
    } else {
      expect(res.status, `${describeRoute(route)} with a valid ${kind} credential: ${res.text}`).toBe(403);
      expect(res.body?.error, `${describeRoute(route)} with a valid ${kind} credential`).toBe("credential_not_allowed");
    }
  }
}
