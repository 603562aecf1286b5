import { Hono } from "hono";
import type { AppEnv } from "../../../auth/app-env";
import { actorOf } from "../../../auth/middleware";
import { placementOf } from "../../../ledger/place";
import { ApiError } from "../../../lib/errors";
import { clientAddressOf, limitSignIn, SignInEmail } from "../../auth-routes";
import { normalizeEmail, revokeSession, startEmailSignIn, verifyEmailSignIn } from "../../sign-in";
import { field, form } from "../forms";
import { Page } from "../layout";
import { SignInForm } from "../pages/sign-in";
import type { Ui } from "../render";
import {
  CSRF_REFUSED,
  checkPreSessionCsrf,
  clearSessionCookie,
  preSessionCsrf,
  requirePageSession,
  setSessionCookie,
} from "../session";

/** Back at the e-mail step: 400, the address is not one. */
const invalidEmailPage = (c: Ui, csrf: string) =>
  c.html(
    <Page title="Sign in" error="Enter a valid e-mail address.">
      {<SignInForm csrf={csrf} step="email" />}
    </Page>,
    400,
  );

/**
 * The sign-in pages' rate limits, as the JSON routes': a page answering 429 with Retry-After,
 * back at the e-mail step (a new code starts there), or null when the attempt may go on.
 */
async function signInLimited(c: Ui, email: string, kind: "start" | "verify", csrf: string) {
  try {
    await limitSignIn(placementOf(c.env).control.db, email, clientAddressOf(c.req.header("cf-connecting-ip")), kind);
    return null;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 429)) throw error;
    const retryAfter = error.headers?.["Retry-After"] ?? "60";
    const minutes = Math.max(1, Math.ceil(Number(retryAfter) / 60));
    c.header("Retry-After", retryAfter);
    return c.html(
      <Page title="Sign in" error={`Too many attempts; try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`}>
        {<SignInForm csrf={csrf} step="email" />}
      </Page>,
      429,
    );
  }
}

/** Signing in by e-mail code and out; before a session, a pre-session cookie carries the CSRF binding. */
export const signInRoutes = new Hono<AppEnv>()
  .get("/console", (c) => c.redirect("/console/ui", 302))
  .get("/console/sign-in", async (c) => {
    const csrf = await preSessionCsrf(c);
    return c.html(<Page title="Sign in">{<SignInForm csrf={csrf} step="email" />}</Page>);
  })
  .post("/console/sign-in", async (c) => {
    const body = await form(c);
    if (!(await checkPreSessionCsrf(c, body._csrf))) throw CSRF_REFUSED;
    const email = SignInEmail.safeParse(body.email);
    const csrf = await preSessionCsrf(c);
    if (!email.success) return invalidEmailPage(c, csrf);
    const limited = await signInLimited(c, email.data, "start", csrf);
    if (limited) return limited;
    await startEmailSignIn(c.env, c.get("settings"), email.data, (work) => c.executionCtx.waitUntil(work));
    return c.html(
      <Page title="Sign in">{<SignInForm csrf={csrf} step="code" email={normalizeEmail(email.data)} />}</Page>,
    );
  })
  .post("/console/sign-in/verify", async (c) => {
    const body = await form(c);
    if (!(await checkPreSessionCsrf(c, body._csrf))) throw CSRF_REFUSED;
    const email = SignInEmail.safeParse(body.email);
    const code = field(body, "code");
    const csrf = await preSessionCsrf(c);
    // The address keys a stored rate-limit counter: only a valid one (at most 254 characters) gets that far.
    if (!email.success) return invalidEmailPage(c, csrf);
    const limited = await signInLimited(c, email.data, "verify", csrf);
    if (limited) return limited;
    const session = /^\d{6}$/.test(code) ? await verifyEmailSignIn(c.env, c.get("settings"), email.data, code) : null;
    if (!session)
      return c.html(
        <Page title="Sign in" error="That code is not valid. Ask for a new one if it expired.">
          {<SignInForm csrf={csrf} step="code" email={normalizeEmail(email.data)} />}
        </Page>,
        401,
      );
    setSessionCookie(c, session.token, session.expiresAt);
    return c.redirect("/console/ui", 303);
  })
  .post("/console/sign-out", requirePageSession, async (c) => {
    const actor = actorOf(c.get("actor"), "console");
    if (actor.jti && actor.expiresAt) await revokeSession(c.env, actor.jti, actor.expiresAt);
    clearSessionCookie(c);
    return c.redirect("/console/sign-in", 303);
  });
