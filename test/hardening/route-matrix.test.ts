import { describe, expect, it } from "vitest";
import { buildApp } from "../../src/app";
import { type CredentialKind, expectAuthMatrix, REQUIRED_ERROR } from "../helpers/auth-matrix";
import { callWorker } from "../helpers/direct";

/**
 * The security matrix, generated from the app's own route table: every route
 * is found here, so a new one is covered without anyone remembering to add it.
 * A route is public only if it is in this list; console pages answer a sign-in
 * redirect; every other route must answer 401 naming its credential, and then
 * pass the whole matrix (malformed, unknown, expired, wrong kind: 401/403).
 */
const PUBLIC_ROUTES = new Set([
  "GET /charges/:chargeId",
  "GET /charges/:chargeId/x402",
  "GET /charges/:chargeId/receipt",
  "GET /.well-known/jwks.json",
  "GET /checkout/:token",
  "GET /checkout/:token/x402",
  "POST /checkout/:token/x402",
  "GET /x402/settlements/:settlementId",
  "GET /x402/settlements",
  // The x402 discovery list is public by the protocol: any client may browse what is for sale.
  "GET /x402/facilitator/discovery/resources",
  "GET /pl/:code",
  "POST /console/auth/email/start",
  "POST /console/auth/email/verify",
  "POST /console/auth/access",
  "GET /console",
  "GET /console/sign-in",
  "POST /console/sign-in",
  "POST /console/sign-in/verify",
  "GET /openapi.json",
  "GET /docs",
]);

const routes = buildApp()
  .routes.filter((r) => ["GET", "POST", "PUT", "PATCH", "DELETE"].includes(r.method) && !r.path.includes("*"))
  .map((r) => ({ method: r.method, path: r.path }))
  .filter((r, i, all) => all.findIndex((o) => o.method === r.method && o.path === r.path) === i);

const concrete = (path: string) =>
  path.replace(/:(\w+)(\{[^}]*\})?/g, (_m, name: string, pattern?: string) =>
    pattern ? pattern.slice(1, -1).split("|")[0]! : `${name}_doesnotexist`,
  );

const kindOf = (error: unknown): CredentialKind | null =>
  (Object.entries(REQUIRED_ERROR).find(([, message]) => message === error)?.[0] as CredentialKind | undefined) ?? null;

describe("security matrix over the route table", () => {
  it("the route table is what the app serves", () => {
    expect(routes.length).toBeGreaterThan(40);
    expect(routes).toContainEqual({ method: "POST", path: "/charges/:chargeId/pay" });
  });

  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    it(key, async () => {
      const path = concrete(route.path);
      const body = route.method === "GET" || route.method === "DELETE" ? undefined : {};
      const anonymous = await callWorker(route.method, path, { body });
      if (PUBLIC_ROUTES.has(key)) {
        // Public: it may refuse the request for its own reasons, but never asks for an API credential.
        expect(kindOf(anonymous.body?.error)).toBeNull();
        expect(anonymous.status).toBeLessThan(500);
        return;
      }
      if (path.startsWith("/console/ui") || path === "/console/sign-out") {
        // Console pages: no session, no page; sent to sign in.
        expect(anonymous.status).toBe(303);
        expect(anonymous.headers.get("location")).toBe("/console/sign-in");
        return;
      }
      expect(anonymous.status, `${key} without a credential`).toBe(401);
      const kind = kindOf(anonymous.body.error);
      expect(kind, `${key} names the credential it expects`).not.toBeNull();
      await expectAuthMatrix({ method: route.method, path, expects: kind!, body });
    });
  }
});
