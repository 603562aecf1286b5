import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi, type MockInstance } from "vitest";
import { api, consoleToken } from "../helpers/api";

let log: MockInstance<typeof console.log>;
beforeEach(() => {
  log = vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => log.mockRestore());

/** The code the development mail transport printed for `email`, if any. */
const printedCode = (email: string) =>
  log.mock.calls
    .map((call) => call.join(" "))
    .filter((line) => line.includes(`to=${email}`))
    .map((line) => /sign-in code is (\d{6})/.exec(line)?.[1])
    .filter(Boolean)
    .pop();

const start = (email: string, ip = "198.51.100.1") => api("POST", "/console/auth/email/start", { body: { email }, headers: { "cf-connecting-ip": ip } });
const verify = (email: string, code: string, ip = "198.51.100.1") => api("POST", "/console/auth/email/verify", { body: { email, code }, headers: { "cf-connecting-ip": ip } });

describe("e-mail code sign-in", () => {
  it("answers 202 {sent:true} alike for allowed and other addresses; only the allowed one gets a code", async () => {
    const allowed = await start("ops@example.com");
    const other = await start("stranger@example.com", "198.51.100.2");
    expect(allowed.status).toBe(202);
    expect(other.status).toBe(202);
    expect(allowed.body).toEqual({ sent: true });
    expect(other.body).toEqual({ sent: true });
    const code = printedCode("ops@example.com");
    expect(code).toMatch(/^\d{6}$/);
    expect(printedCode("stranger@example.com")).toBeUndefined();
    const rows = await env.DB.prepare("SELECT * FROM console_login_codes").all<Record<string, unknown>>();
    expect(rows.results.map((r) => r.email)).toEqual(["ops@example.com"]);
    expect(JSON.stringify(rows.results)).not.toContain(code);
    expect((await api("POST", "/console/auth/email/start", { body: { email: "not-an-email" } })).status).toBe(400);
  });

  it("the right code gives a session token (<= 12 h) that works on console routes; the code is single use", async () => {
    await start("ops@example.com", "198.51.100.3");
    const code = printedCode("ops@example.com")!;
    const res = await verify("ops@example.com", code, "198.51.100.3");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), expiresAt: expect.any(String) });
    expect(Date.parse(res.body.expiresAt) - Date.now()).toBeLessThanOrEqual(12 * 3600_000 + 1000);
    expect((await api("GET", "/console/agents", { token: res.body.token })).status).toBe(200);
    const again = await verify("ops@example.com", code, "198.51.100.3");
    expect(again.status).toBe(401);
    expect(again.body).toEqual({ error: "invalid_code" });
  });

  it("five wrong tries end the code; an expired code fails; a new start replaces the old code", async () => {
    await start("ops@example.com", "198.51.100.4");
    const code = printedCode("ops@example.com")!;
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 0; i < 5; i++) expect((await verify("ops@example.com", wrong, "198.51.100.4")).status).toBe(401);
    expect((await verify("ops@example.com", code, "198.51.100.4")).status).toBe(401);

    await start("ops@example.com", "198.51.100.5");
    const second = printedCode("ops@example.com")!;
    await start("ops@example.com", "198.51.100.5");
    const third = printedCode("ops@example.com")!;
    if (second !== third) expect((await verify("ops@example.com", second, "198.51.100.5")).status).toBe(401);
    await env.DB.prepare("UPDATE console_login_codes SET expires_at = ? WHERE email = 'ops@example.com'").bind(new Date(Date.now() - 1000).toISOString()).run();
    expect((await verify("ops@example.com", third, "198.51.100.5")).status).toBe(401);
  });

  it("rate limits starts per address: the 6th in the window is 429 with Retry-After", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await start("ratelimited@example.com", `203.0.113.${i}`)).status);
    expect(statuses.slice(0, 5)).toEqual([202, 202, 202, 202, 202]);
    const limited = await start("ratelimited@example.com", "203.0.113.99");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("sign-out ends that session only", async () => {
    const a = await consoleToken();
    const b = await consoleToken();
    expect((await api("POST", "/console/auth/sign-out", { token: a })).status).toBe(200);
    expect((await api("GET", "/console/agents", { token: a })).status).toBe(401);
    expect((await api("GET", "/console/agents", { token: b })).status).toBe(200);
  });

  it("users added from the console may sign in; GET /console/users lists both kinds", async () => {
    const token = await consoleToken();
    expect((await api("GET", "/console/agents", { token: await consoleToken("newbie@example.com") })).status).toBe(401);
    const added = await api("POST", "/console/users", { token, body: { email: "Newbie@Example.com" } });
    expect(added.status).toBe(201);
    await start("newbie@example.com", "198.51.100.9");
    const code = printedCode("newbie@example.com")!;
    const session = await verify("newbie@example.com", code, "198.51.100.9");
    expect(session.status).toBe(200);
    expect((await api("GET", "/console/agents", { token: session.body.token })).status).toBe(200);
    const users = await api("GET", "/console/users", { token });
    expect(users.body.users).toEqual(
      expect.arrayContaining([
        { email: "ops@example.com", source: "configured", addedBy: null, createdAt: null },
        { email: "newbie@example.com", source: "console", addedBy: "ops@example.com", createdAt: expect.any(String) },
      ]),
    );
  });
});
