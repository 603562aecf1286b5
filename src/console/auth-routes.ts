import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { addConsoleUser, isConsoleUser, listAddedConsoleUsers } from "../auth/console-users";
import { signConsoleToken } from "../auth/jwt";
import { actorOf, requireActor } from "../auth/middleware";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { hitRateLimit } from "../lib/rate-limit";
import { nowIso } from "../lib/time";
import { validate } from "../lib/validation";
import { verifyAccessAssertion } from "./access";
import { normalizeEmail, revokeSession, startEmailSignIn, verifyEmailSignIn } from "./sign-in";

/** A console address, as every sign-in route takes it. */
export const SignInEmail = z.string().trim().email().max(254);
export const StartBody = z.object({ email: SignInEmail }).strict();
export const VerifyBody = z
  .object({ email: SignInEmail, code: z.string().regex(/^\d{6}$/, "a 6-digit code") })
  .strict();
export const UserBody = z.object({ email: SignInEmail }).strict();

/** The client address Cloudflare reports; locally, one shared bucket. */
export const clientAddressOf = (header: string | undefined) => header ?? "local";

/**
 * 429 with Retry-After when either the address or the client has asked too often. `email` must
 * already be a valid address (at most 254 characters): it keys a stored counter.
 */
export async function limitSignIn(db: D1Database, email: string, client: string, kind: "start" | "verify") {
  const limits = kind === "start" ? { perAddress: 5, perClient: 30 } : { perAddress: 10, perClient: 60 };
  const waits = await Promise.all([
    hitRateLimit(db, `signin-${kind}:email:${normalizeEmail(email)}`, limits.perAddress, 900),
    hitRateLimit(db, `signin-${kind}:client:${client}`, limits.perClient, 900),
  ]);
  const wait = Math.max(...waits.map((w) => w ?? 0));
  if (wait > 0) throw new ApiError(429, "too_many_requests", {}, { "Retry-After": String(wait) });
}

export const consoleAuthRoutes = new Hono<AppEnv>()
  .post("/console/auth/email/start", validate("json", StartBody), async (c) => {
    const { email } = c.req.valid("json");
    await limitSignIn(placementOf(c.env).control.db, email, clientAddressOf(c.req.header("cf-connecting-ip")), "start");
    await startEmailSignIn(c.env, c.get("settings"), email, (work) => c.executionCtx.waitUntil(work));
    // The same answer for every address: it never reveals who may sign in.
    return c.json({ sent: true }, 202);
  })
  .post("/console/auth/email/verify", validate("json", VerifyBody), async (c) => {
    const { email, code } = c.req.valid("json");
    await limitSignIn(
      placementOf(c.env).control.db,
      email,
      clientAddressOf(c.req.header("cf-connecting-ip")),
      "verify",
    );
    const session = await verifyEmailSignIn(c.env, c.get("settings"), email, code);
    if (!session) throw new ApiError(401, "invalid_code");
    return c.json(session);
  })
  .post("/console/auth/access", async (c) => {
    const settings = c.get("settings");
    if (!settings.access) throw new ApiError(404, "access_sign_in_not_configured");
    const assertion = c.req.header("cf-access-jwt-assertion");
    if (!assertion) throw new ApiError(401, "access_assertion_required");
    const email = await verifyAccessAssertion(settings.access, assertion);
    if (!email) throw new ApiError(401, "access_assertion_invalid");
    if (!(await isConsoleUser(placementOf(c.env).control.db, settings, email)))
      throw new ApiError(403, "not_a_console_user");
    return c.json(await signConsoleToken(settings.consoleSessionSecret, email));
  })
  .post("/console/auth/sign-out", requireActor("console"), async (c) => {
    const actor = actorOf(c.get("actor"), "console");
    if (actor.jti && actor.expiresAt) await revokeSession(c.env, actor.jti, actor.expiresAt);
    return c.json({ signedOut: true });
  })
  .get("/console/users", requireActor("console"), async (c) => {
    const added = await listAddedConsoleUsers(placementOf(c.env).control.db);
    return c.json({
      users: [
        ...c
          .get("settings")
          .consoleUsers.map((email) => ({ email, source: "configured", addedBy: null, createdAt: null })),
        ...added.map((u) => ({ email: u.email, source: "console", addedBy: u.addedBy, createdAt: u.createdAt })),
      ],
    });
  })
  .post("/console/users", requireActor("console"), validate("json", UserBody), async (c) => {
    const email = normalizeEmail(c.req.valid("json").email);
    const user = { email, addedBy: actorOf(c.get("actor"), "console").email, createdAt: nowIso() };
    await addConsoleUser(placementOf(c.env).control.db, user);
    return c.json({ user }, 201);
  });
