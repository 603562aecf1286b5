import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest";
import type { Env } from "../../src/config/env";
import worker from "../../src/index";
import { api, consoleToken, OPS_EMAIL } from "../helpers/api";
import { receiverUrl } from "../helpers/webhooks";

// E-mail code sign-in (docs/api.md, Console sign-in) through the Worker in workerd.
// The test mail transport is "log": the Worker prints "Your sign-in code is
// NNNNNN" with console.log in this same isolate, so a spy reads the code.
// Each test uses its own address and client address, so per-address and
// per-client limits and codes never leak from one test into another.

let log: MockInstance<typeof console.log>;
beforeEach(() => {
  log = vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => log.mockRestore());

/** Every code the mail transport printed for `email`, oldest first. */
const printedCodes = (email: string) =>
  log.mock.calls
    .map((call) => call.map(String).join(" "))
    .filter((line) => line.includes(`to=${email} `))
    .map((line) => /Your sign-in code is (\d{6})/.exec(line)?.[1])
    .filter((code): code is string => code !== undefined);

/** The latest code printed for `email`; fails the test when there is none. */
const codeFor = (email: string) => {
  const codes = printedCodes(email);
  expect(codes.length, `a code printed for ${email}`).toBeGreaterThan(0);
  return codes[codes.length - 1]!;
};

/** A different 6-digit code than `code`. */
const otherThan = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, "0");

const start = (email: string, ip: string) =>
  api("POST", "/console/auth/email/start", { body: { email }, headers: { "cf-connecting-ip": ip } });
const verify = (email: string, code: string, ip: string) =>
  api("POST", "/console/auth/email/verify", { body: { email, code }, headers: { "cf-connecting-ip": ip } });

/** Lets `email` sign in, as a signed-in console user would. */
async function allow(email: string) {
  const res = await api("POST", "/console/users", { token: await consoleToken(), body: { email } });
  expect(res.status).toBe(201);
}

const codeRows = (...emails: string[]) =>
  env.DB.prepare(`SELECT * FROM console_login_codes WHERE email IN (${emails.map(() => "?").join(",")})`)
    .bind(...emails)
    .all<Record<string, unknown>>()
    .then((r) => r.results);

/** Decodes a JWT's payload (no verification: the Worker verifies; this only reads claims). */
const claimsOf = (token: string) =>
  JSON.parse(atob(token.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/"))) as Record<string, unknown>;

describe("POST /console/auth/email/start", () => {
  it("answers 202 {sent:true} alike for an allowed and a not allowed address; only the allowed one gets a code and a row", async () => {
    const allowed = await start(OPS_EMAIL, "198.51.100.1");
    const stranger = await start("stranger@example.com", "198.51.100.2");
    expect(allowed.status).toBe(202);
    expect(stranger.status).toBe(202);
    expect(allowed.body).toEqual({ sent: true });
    expect(stranger.body).toEqual(allowed.body);

    expect(printedCodes(OPS_EMAIL)).toHaveLength(1);
    expect(printedCodes(OPS_EMAIL)[0]).toMatch(/^\d{6}$/);
    expect(printedCodes("stranger@example.com")).toEqual([]);
    // Nothing at all is printed about the stranger.
    expect(log.mock.calls.flat().join("\n")).not.toContain("stranger@example.com");

    const rows = await codeRows(OPS_EMAIL, "stranger@example.com");
    expect(rows.map((r) => r.email)).toEqual([OPS_EMAIL]);
  });

  it("a failing mail API changes nothing in the answer: 202 {sent:true} for an allowed address as for any other", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      // The configured transport is a mail API that answers 500 (the test receiver's fail hook).
      const failingMail = {
        ...env,
        MAIL_TRANSPORT: "http",
        MAIL_FROM: "console@example.com",
        MAIL_HTTP_URL: `${receiverUrl()}/hooks/fail-mail-api`,
      } as Env;
      const startWith = async (email: string, ip: string) => {
        const ctx = createExecutionContext();
        const init = {
          method: "POST",
          headers: { "content-type": "application/json", "cf-connecting-ip": ip },
          body: JSON.stringify({ email }),
        };
        const res = await worker.fetch!(
          new Request("http://service.test/console/auth/email/start", init) as Request<
            unknown,
            IncomingRequestCfProperties
          >,
          failingMail,
          ctx,
        );
        await waitOnExecutionContext(ctx);
        return { status: res.status, body: await res.json() };
      };
      const allowed = await startWith(OPS_EMAIL, "198.51.100.21");
      const stranger = await startWith("stranger@example.com", "198.51.100.22");
      expect(allowed).toEqual({ status: 202, body: { sent: true } });
      expect(stranger).toEqual(allowed);
      // The failure is logged, without the mail (it holds the code).
      const logged = error.mock.calls.flat().map(String).join("\n");
      expect(logged).toContain("console_mail");
      expect(logged).toContain("500");
      expect(logged).not.toMatch(/sign-in code is/);
      expect(await codeRows(OPS_EMAIL)).toHaveLength(1);
    } finally {
      error.mockRestore();
    }
  });

  it("stores the code only as a hash: no column of the row holds the plaintext code", async () => {
    await start("ops@example.com", "198.51.100.3");
    const code = codeFor(OPS_EMAIL);
    const [row] = await codeRows(OPS_EMAIL);
    expect(row).toBeDefined();
    expect(row!.code_hash).toMatch(/^[0-9a-f]{64}$/);
    for (const [column, value] of Object.entries(row!)) {
      expect(String(value), column).not.toBe(code);
      // A hex hash could contain six decimal digits by chance; the other columns must not hold the code at all.
      if (column !== "code_hash") expect(String(value), column).not.toContain(code);
    }
  });

  it.each([["not-an-email"], [""], ["two@@example.com"]])(
    "400 for a bad e-mail %j, and no code is sent",
    async (email) => {
      const res = await start(email, "198.51.100.4");
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: expect.any(String) });
      expect(log.mock.calls.flat().join("\n")).not.toMatch(/sign-in code is/);
    },
  );

  it("400 for a body without an e-mail", async () => {
    const res = await api("POST", "/console/auth/email/start", {
      body: {},
      headers: { "cf-connecting-ip": "198.51.100.4" },
    });
    expect(res.status).toBe(400);
  });
});

describe("POST /console/auth/email/verify", () => {
  it("the right code gives {token, expiresAt}: the token works on a console route and expires within 12 h", async () => {
    const email = "verify-ok@example.com";
    await allow(email);
    await start(email, "198.51.100.10");
    const before = Date.now();
    const res = await verify(email, codeFor(email), "198.51.100.10");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), expiresAt: expect.any(String) });
    const expiresAt = Date.parse(res.body.expiresAt);
    expect(expiresAt).toBeGreaterThan(before);
    expect(expiresAt - before).toBeLessThanOrEqual(12 * 3600_000 + 1000);
    const claims = claimsOf(res.body.token);
    expect(claims).toMatchObject({ aud: "console", sub: email });
    expect((claims.exp as number) * 1000).toBe(expiresAt);

    const agents = await api("GET", "/console/agents", { token: res.body.token });
    expect(agents.status).toBe(200);
    expect((await api("GET", "/console/agents", { token: `${res.body.token}x` })).status).toBe(401);
  });

  it("the address is matched without regard to case or surrounding spaces", async () => {
    const email = "mixed-case@example.com";
    await allow(email);
    await start("  Mixed-Case@Example.COM ", "198.51.100.11");
    const res = await verify("MIXED-case@example.com", codeFor(email), "198.51.100.11");
    expect(res.status).toBe(200);
    expect(claimsOf(res.body.token).sub).toBe(email);
  });

  it("a wrong code is 401 {error:'invalid_code'}", async () => {
    const email = "verify-wrong@example.com";
    await allow(email);
    await start(email, "198.51.100.12");
    const res = await verify(email, otherThan(codeFor(email)), "198.51.100.12");
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: "invalid_code" });
  });

  it("a code for an address that never started a sign-in is 401, as is a code sent to another address", async () => {
    const a = "verify-a@example.com";
    const b = "verify-b@example.com";
    await allow(a);
    await allow(b);
    expect((await verify("nobody@example.com", "123456", "198.51.100.13")).body).toEqual({ error: "invalid_code" });
    await start(a, "198.51.100.13");
    const codeA = codeFor(a);
    // b's code must differ from a's for the check to mean anything (1 in 10^6 that it does not at once).
    for (let i = 0; i < 3 && (printedCodes(b).length === 0 || codeFor(b) === codeA); i++)
      await start(b, "198.51.100.13");
    expect(codeFor(b)).not.toBe(codeA);
    expect((await verify(b, codeA, "198.51.100.13")).status).toBe(401);
    expect((await verify(a, codeA, "198.51.100.13")).status).toBe(200);
    expect((await verify(b, codeFor(b), "198.51.100.13")).status).toBe(200);
  });

  it("the code works after 4 wrong tries, but after 5 wrong tries even the right code fails", async () => {
    const patient = "four-tries@example.com";
    const careless = "five-tries@example.com";
    await allow(patient);
    await allow(careless);

    await start(patient, "198.51.100.14");
    const patientCode = codeFor(patient);
    for (let i = 0; i < 4; i++)
      expect((await verify(patient, otherThan(patientCode), "198.51.100.14")).status).toBe(401);
    expect((await verify(patient, patientCode, "198.51.100.14")).status).toBe(200);

    await start(careless, "198.51.100.15");
    const code = codeFor(careless);
    for (let i = 0; i < 5; i++) {
      const wrong = await verify(careless, otherThan(code), "198.51.100.15");
      expect(wrong.status).toBe(401);
      expect(wrong.body).toEqual({ error: "invalid_code" });
    }
    const right = await verify(careless, code, "198.51.100.15");
    expect(right.status).toBe(401);
    expect(right.body).toEqual({ error: "invalid_code" });
  });

  it("a code is single use", async () => {
    const email = "single-use@example.com";
    await allow(email);
    await start(email, "198.51.100.16");
    const code = codeFor(email);
    expect((await verify(email, code, "198.51.100.16")).status).toBe(200);
    const again = await verify(email, code, "198.51.100.16");
    expect(again.status).toBe(401);
    expect(again.body).toEqual({ error: "invalid_code" });
  });

  it("two requests racing with the right code: exactly one gets a session", async () => {
    const email = "race@example.com";
    await allow(email);
    await start(email, "198.51.100.17");
    const code = codeFor(email);
    const results = await Promise.all([verify(email, code, "198.51.100.17"), verify(email, code, "198.51.100.17")]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 401]);
  });

  it("an expired code fails", async () => {
    const email = "expired@example.com";
    await allow(email);
    await start(email, "198.51.100.18");
    const code = codeFor(email);
    // The code is issued for 10 minutes.
    const [row] = await codeRows(email);
    const ttl = Date.parse(String(row!.expires_at)) - Date.parse(String(row!.created_at));
    expect(ttl).toBe(10 * 60_000);
    await env.DB.prepare("UPDATE console_login_codes SET expires_at = ? WHERE email = ?")
      .bind(new Date(Date.now() - 1000).toISOString(), email)
      .run();
    const res = await verify(email, code, "198.51.100.18");
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: "invalid_code" });
  });

  it("a new start replaces the old code: the old one fails and the new one works", async () => {
    const email = "replaced@example.com";
    await allow(email);
    await start(email, "198.51.100.19");
    const first = codeFor(email);
    // Ask again until the new code differs from the first (1 in 10^6 that it does not).
    let second = first;
    for (let i = 0; i < 3 && second === first; i++) {
      await start(email, "198.51.100.19");
      second = codeFor(email);
    }
    expect(second).not.toBe(first);
    expect(await codeRows(email)).toHaveLength(1);
    const old = await verify(email, first, "198.51.100.19");
    expect(old.status).toBe(401);
    expect(old.body).toEqual({ error: "invalid_code" });
    expect((await verify(email, second, "198.51.100.19")).status).toBe(200);
  });

  it("a new start also resets the tries spent on the old code", async () => {
    const email = "reset-tries@example.com";
    await allow(email);
    await start(email, "198.51.100.20");
    const first = codeFor(email);
    for (let i = 0; i < 5; i++) await verify(email, otherThan(first), "198.51.100.20");
    await start(email, "198.51.100.20");
    expect((await verify(email, codeFor(email), "198.51.100.20")).status).toBe(200);
  });

  it.each([
    ["a 5-digit code", { email: OPS_EMAIL, code: "12345" }],
    ["letters", { email: OPS_EMAIL, code: "12a456" }],
    ["no code", { email: OPS_EMAIL }],
    ["a bad e-mail", { email: "nope", code: "123456" }],
  ])("400 for %s", async (_name, body) => {
    const res = await api("POST", "/console/auth/email/verify", {
      body,
      headers: { "cf-connecting-ip": "198.51.100.21" },
    });
    expect(res.status).toBe(400);
  });
});

describe("rate limits", () => {
  /** The limits count in fixed 15-minute windows; do not start a burst in the window's last seconds. */
  async function awayFromWindowEdge() {
    const intoWindow = (Date.now() / 1000) % 900;
    if (intoWindow > 890) await new Promise((r) => setTimeout(r, (900 - intoWindow + 0.5) * 1000));
  }

  it("the 6th start for one address within the window is 429 with Retry-After, even from other clients", async () => {
    await awayFromWindowEdge();
    const email = "ratelimited@example.com";
    await allow(email);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await start(email, `203.0.113.${i + 1}`)).status);
    expect(statuses).toEqual([202, 202, 202, 202, 202]);
    const limited = await start(email, "203.0.113.99");
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ error: "too_many_requests" });
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(900);
    // No sixth code was sent.
    expect(printedCodes(email)).toHaveLength(5);
    // Another address is not held back by it.
    expect((await start("another-address@example.com", "203.0.113.100")).status).toBe(202);
  });

  it("the limit answers the same for an address that may not sign in (it reveals nothing)", async () => {
    await awayFromWindowEdge();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++)
      statuses.push((await start("limited-stranger@example.com", `203.0.114.${i + 1}`)).status);
    expect(statuses).toEqual([202, 202, 202, 202, 202, 429]);
  });

  it("one client asking for many addresses is limited too (30 starts per window)", async () => {
    await awayFromWindowEdge();
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await start(`bulk-${i}@example.com`, "203.0.115.1")).status);
    expect(statuses.slice(0, 30).every((s) => s === 202)).toBe(true);
    expect(statuses[30]).toBe(429);
  });
});

describe("sessions and console users", () => {
  it("sign-out makes that token 401 while another token for the same user still works", async () => {
    const email = "sign-out@example.com";
    await allow(email);
    await start(email, "198.51.100.30");
    const a = (await verify(email, codeFor(email), "198.51.100.30")).body.token as string;
    await start(email, "198.51.100.30");
    const b = (await verify(email, codeFor(email), "198.51.100.30")).body.token as string;
    expect((await api("GET", "/console/agents", { token: a })).status).toBe(200);

    const out = await api("POST", "/console/auth/sign-out", { token: a });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ signedOut: true });
    const after = await api("GET", "/console/agents", { token: a });
    expect(after.status).toBe(401);
    expect((await api("POST", "/console/auth/sign-out", { token: a })).status).toBe(401);
    expect((await api("GET", "/console/agents", { token: b })).status).toBe(200);
  });

  it("sign-out needs a session", async () => {
    expect((await api("POST", "/console/auth/sign-out")).status).toBe(401);
  });

  it("a user added with POST /console/users can sign in; GET /console/users lists configured and added users", async () => {
    const token = await consoleToken();
    const email = "newbie@example.com";
    // Before being added: no code is sent and a token for the address is refused.
    await start(email, "198.51.100.31");
    expect(printedCodes(email)).toEqual([]);
    expect((await api("GET", "/console/agents", { token: await consoleToken(email) })).status).toBe(401);

    const added = await api("POST", "/console/users", { token, body: { email: "Newbie@Example.com" } });
    expect(added.status).toBe(201);
    expect(added.body).toEqual({ user: { email, addedBy: OPS_EMAIL, createdAt: expect.any(String) } });

    await start(email, "198.51.100.31");
    const session = await verify(email, codeFor(email), "198.51.100.31");
    expect(session.status).toBe(200);
    expect((await api("GET", "/console/agents", { token: session.body.token })).status).toBe(200);

    const users = await api("GET", "/console/users", { token });
    expect(users.status).toBe(200);
    expect(users.body.users).toEqual(
      expect.arrayContaining([
        { email: OPS_EMAIL, source: "configured", addedBy: null, createdAt: null },
        { email, source: "console", addedBy: OPS_EMAIL, createdAt: expect.any(String) },
      ]),
    );
    expect(users.body.users.filter((u: { email: string }) => u.email === email)).toHaveLength(1);
  });

  it("a token for a user who is not allowed is 401, on the users list as on other routes", async () => {
    const stranger = await consoleToken("outsider@example.com");
    expect((await api("GET", "/console/agents", { token: stranger })).status).toBe(401);
    expect((await api("GET", "/console/users", { token: stranger })).status).toBe(401);
    expect(
      (await api("POST", "/console/users", { token: stranger, body: { email: "outsider@example.com" } })).status,
    ).toBe(401);
    // ...and it did not add itself.
    expect((await api("GET", "/console/agents", { token: stranger })).status).toBe(401);
  });

  it("POST /console/users needs a valid e-mail and a session", async () => {
    const token = await consoleToken();
    expect((await api("POST", "/console/users", { token, body: { email: "not-an-email" } })).status).toBe(400);
    expect((await api("POST", "/console/users", { body: { email: "someone@example.com" } })).status).toBe(401);
    expect((await api("GET", "/console/users")).status).toBe(401);
  });
});
