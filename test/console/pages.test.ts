import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi, type MockInstance } from "vitest";
import { api, consoleToken } from "../helpers/api";

const cookieOf = (res: { headers: Headers }, name: string) => {
  const header = (res.headers as unknown as { getSetCookie(): string[] }).getSetCookie().find((c) => c.startsWith(`${name}=`));
  return header ? { header, value: header.slice(name.length + 1).split(";")[0]! } : null;
};
const csrfIn = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
const form = (fields: Record<string, string>) => ({ body: new URLSearchParams(fields).toString(), headers: { "content-type": "application/x-www-form-urlencoded" } });

let log: MockInstance<typeof console.log>;
beforeEach(() => {
  log = vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => log.mockRestore());

describe("console pages", () => {
  it("without a session the console sends you to sign in", async () => {
    const root = await api("GET", "/console");
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/console/ui");
    const page = await api("GET", "/console/ui");
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/console/sign-in");
  });

  it("the HTML sign-in sets an HttpOnly, Secure, SameSite=Strict session cookie; without its pre-session cookie it is refused", async () => {
    const first = await api("GET", "/console/sign-in");
    const pre = cookieOf(first, "console_presession")!;
    const csrf = csrfIn(first.text)!;
    const headers = { cookie: `console_presession=${pre.value}`, "content-type": "application/x-www-form-urlencoded" };
    const noCookie = await api("POST", "/console/sign-in", form({ _csrf: csrf, email: "ops@example.com" }));
    expect(noCookie.status).toBe(403);
    const started = await api("POST", "/console/sign-in", { body: new URLSearchParams({ _csrf: csrf, email: "ops@example.com" }).toString(), headers });
    expect(started.status).toBe(200);
    const code = /sign-in code is (\d{6})/.exec(log.mock.calls.flat().join("\n"))![1]!;
    const verified = await api("POST", "/console/sign-in/verify", { body: new URLSearchParams({ _csrf: csrfIn(started.text)!, email: "ops@example.com", code }).toString(), headers });
    expect(verified.status).toBe(303);
    expect(verified.headers.get("location")).toBe("/console/ui");
    const session = cookieOf(verified, "console_session")!;
    expect(session.header).toMatch(/HttpOnly/i);
    expect(session.header).toMatch(/Secure/i);
    expect(session.header).toMatch(/SameSite=Strict/i);
    const overview = await api("GET", "/console/ui", { headers: { cookie: `console_session=${session.value}` } });
    expect(overview.status).toBe(200);
    expect(overview.text).toContain("Paid volume by hour");
  });

  it("every page renders for a signed-in user", async () => {
    const cookie = `console_session=${await consoleToken()}`;
    for (const [path, title] of [
      ["/console/ui", "Overview"],
      ["/console/ui/merchants", "Merchants"],
      ["/console/ui/agents", "Agents"],
      ["/console/ui/approvals", "Approvals"],
      ["/console/ui/webhooks", "Webhooks"],
      ["/console/ui/kyt", "KYT screening"],
      ["/console/ui/transactions", "Transactions"],
      ["/console/ui/users", "Console users"],
    ]) {
      const res = await api("GET", path!, { headers: { cookie } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/html");
      expect(res.text).toContain(`<h1>${title}</h1>`);
    }
  });

  it("a form without the right CSRF token is 403 and changes nothing; with it the merchant key is shown once", async () => {
    const cookie = `console_session=${await consoleToken()}`;
    const before = await env.DB.prepare("SELECT COUNT(*) AS n FROM merchants").first<{ n: number }>();
    const forged = await api("POST", "/console/ui/merchants", { body: "name=Forged&_csrf=nope", headers: { cookie, "content-type": "application/x-www-form-urlencoded" } });
    expect(forged.status).toBe(403);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM merchants").first<{ n: number }>())?.n).toBe(before?.n);
    const page = await api("GET", "/console/ui/merchants", { headers: { cookie } });
    const created = await api("POST", "/console/ui/merchants", { body: new URLSearchParams({ name: "Form Shop", _csrf: csrfIn(page.text)! }).toString(), headers: { cookie, "content-type": "application/x-www-form-urlencoded" } });
    expect(created.status).toBe(200);
    const keys = created.text.match(/sk_mch_[A-Za-z0-9_-]{43}/g) ?? [];
    expect(keys).toHaveLength(1);
    const again = await api("GET", "/console/ui/merchants", { headers: { cookie } });
    expect(again.text).toContain("Form Shop");
    expect(again.text).not.toContain(keys[0]);
  });

  it("signing out from the page ends the session", async () => {
    const token = await consoleToken();
    const cookie = `console_session=${token}`;
    const page = await api("GET", "/console/ui", { headers: { cookie } });
    const out = await api("POST", "/console/sign-out", { body: new URLSearchParams({ _csrf: csrfIn(page.text)! }).toString(), headers: { cookie, "content-type": "application/x-www-form-urlencoded" } });
    expect(out.status).toBe(303);
    expect((await api("GET", "/console/ui", { headers: { cookie } })).status).toBe(303);
    expect((await api("GET", "/console/agents", { token })).status).toBe(401);
  });
});
