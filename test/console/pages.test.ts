import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest";
import { signConsoleToken } from "../../src/auth/jwt";
import { type ApiResponse, api, consoleToken, OPS_EMAIL } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";

// The server-rendered console pages through the Worker in workerd (no browser).

const setCookies = (res: ApiResponse) => (res.headers as unknown as { getSetCookie(): string[] }).getSetCookie();
const cookieOf = (res: ApiResponse, name: string) => {
  const header = setCookies(res).find((c) => c.startsWith(`${name}=`));
  return header ? { header, value: header.slice(name.length + 1).split(";")[0]! } : null;
};
const csrfIn = (html: string) => {
  const token = /<input type="hidden" name="_csrf" value="([^"]*)"/.exec(html)?.[1];
  expect(token, "a _csrf field in the page").toBeTruthy();
  return token!;
};
const FORM = { "content-type": "application/x-www-form-urlencoded" };
const page = (path: string, cookie: string) => api("GET", path, { headers: { cookie } });
const post = (path: string, cookie: string | null, fields: Record<string, string>) =>
  api("POST", path, {
    body: new URLSearchParams(fields).toString(),
    headers: { ...FORM, ...(cookie ? { cookie } : {}) },
  });

/** A signed-in page session: its cookie and the CSRF token its pages carry. */
async function session(email = OPS_EMAIL) {
  const token = await consoleToken(email);
  const cookie = `console_session=${token}`;
  const overview = await page("/console/ui", cookie);
  expect(overview.status).toBe(200);
  return { token, cookie, csrf: csrfIn(overview.text) };
}

/** How many rows of `table` have `column` = `value` (by name, so other tests' rows never interfere). */
const rowsWith = async (table: string, column: string, value: string) =>
  (await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE ${column} = ?`).bind(value).first<{ n: number }>())!
    .n;

let log: MockInstance<typeof console.log>;
beforeEach(() => {
  log = vi.spyOn(console, "log").mockImplementation(() => undefined);
});
afterEach(() => log.mockRestore());

describe("without a session", () => {
  it("GET /console redirects to /console/ui, which redirects to /console/sign-in", async () => {
    const root = await api("GET", "/console");
    expect([301, 302, 303, 307, 308]).toContain(root.status);
    expect(root.headers.get("location")).toBe("/console/ui");
    const ui = await api("GET", "/console/ui");
    expect([302, 303]).toContain(ui.status);
    expect(ui.headers.get("location")).toBe("/console/sign-in");
  });

  it.each([
    "/console/ui/merchants",
    "/console/ui/merchants/mch_doesnotexist",
    "/console/ui/agents",
    "/console/ui/approvals",
    "/console/ui/webhooks",
    "/console/ui/kyt",
    "/console/ui/transactions",
    "/console/ui/transactions.csv",
    "/console/ui/users",
  ])("GET %s redirects to sign-in and shows no data", async (path) => {
    const res = await api("GET", path);
    expect([302, 303]).toContain(res.status);
    expect(res.headers.get("location")).toBe("/console/sign-in");
    expect(res.text).not.toContain("<table");
  });

  const badCookies: [string, () => Promise<string>][] = [
    ["a garbage cookie", async () => "not-a-token"],
    ["a token for someone who is not a console user", () => consoleToken("visitor@example.com")],
    [
      "a token signed with another secret",
      async () => (await signConsoleToken("some-other-secret-0123456789abcdef0123456789", OPS_EMAIL)).token,
    ],
    [
      "an expired token",
      async () => (await signConsoleToken(env.CONSOLE_SESSION_SECRET!, OPS_EMAIL, 60, Date.now() - 3600_000)).token,
    ],
    ["a merchant API key", async () => (await createMerchant({ name: "Cookie Shop" })).apiKey],
  ];
  it.each(badCookies)("%s is sent to sign in, and the bad cookie is cleared", async (_name, make) => {
    const res = await page("/console/ui/merchants", `console_session=${await make()}`);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/sign-in");
    expect(res.text).not.toContain("<table");
    const cleared = cookieOf(res, "console_session");
    expect(cleared).not.toBeNull();
    expect(cleared!.value).toBe("");
  });

  it("the sign-in page renders an e-mail form with a CSRF field and sets an HttpOnly, Secure, SameSite=Strict pre-session cookie", async () => {
    const res = await api("GET", "/console/sign-in");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.text).toContain("<h1>Sign in</h1>");
    expect(res.text).toContain('action="/console/sign-in"');
    expect(res.text).toContain('name="email"');
    expect(csrfIn(res.text)).toMatch(/^[0-9a-f]{64}$/);
    const pre = cookieOf(res, "console_presession")!;
    expect(pre).not.toBeNull();
    expect(pre.header).toMatch(/;\s*HttpOnly/i);
    expect(pre.header).toMatch(/;\s*Secure/i);
    expect(pre.header).toMatch(/;\s*SameSite=Strict/i);
    // No navigation for someone not signed in.
    expect(res.text).not.toContain('href="/console/ui/merchants"');
  });
});

describe("HTML sign-in", () => {
  /** GET /console/sign-in: the pre-session cookie and the form's CSRF token. */
  async function signInPage() {
    const res = await api("GET", "/console/sign-in");
    return { cookie: `console_presession=${cookieOf(res, "console_presession")!.value}`, csrf: csrfIn(res.text) };
  }
  const codeIn = () => {
    const code = /Your sign-in code is (\d{6})/.exec(log.mock.calls.flat().join("\n"))?.[1];
    expect(code, "a printed sign-in code").toBeDefined();
    return code!;
  };

  it("sets a console_session cookie that is HttpOnly, Secure and SameSite=Strict, and the session opens the console", async () => {
    const pre = await signInPage();
    const started = await post("/console/sign-in", pre.cookie, { _csrf: pre.csrf, email: OPS_EMAIL });
    expect(started.status).toBe(200);
    expect(started.text).toContain('action="/console/sign-in/verify"');
    expect(started.text).toContain('name="code"');
    const verified = await post("/console/sign-in/verify", pre.cookie, {
      _csrf: csrfIn(started.text),
      email: OPS_EMAIL,
      code: codeIn(),
    });
    expect(verified.status).toBe(303);
    expect(verified.headers.get("location")).toBe("/console/ui");

    const sessionCookie = cookieOf(verified, "console_session")!;
    expect(sessionCookie).not.toBeNull();
    expect(sessionCookie.header).toMatch(/;\s*HttpOnly/i);
    expect(sessionCookie.header).toMatch(/;\s*Secure/i);
    expect(sessionCookie.header).toMatch(/;\s*SameSite=Strict/i);
    expect(sessionCookie.header).toMatch(/;\s*Path=\//i);
    // The session ends: the cookie expires, at most 12 h ahead.
    const expires = /;\s*Expires=([^;]+)/i.exec(sessionCookie.header)?.[1];
    expect(expires).toBeDefined();
    expect(Date.parse(expires!) - Date.now()).toBeLessThanOrEqual(12 * 3600_000 + 1000);
    expect(Date.parse(expires!)).toBeGreaterThan(Date.now());

    const overview = await page("/console/ui", `console_session=${sessionCookie.value}`);
    expect(overview.status).toBe(200);
    expect(overview.text).toContain("<h1>Overview</h1>");
    expect(overview.text).toContain(OPS_EMAIL);
    // The cookie holds the same kind of session token the API takes.
    expect((await api("GET", "/console/agents", { token: sessionCookie.value })).status).toBe(200);
  });

  it("a wrong code is refused with 401 and sets no session cookie", async () => {
    const pre = await signInPage();
    const started = await post("/console/sign-in", pre.cookie, { _csrf: pre.csrf, email: OPS_EMAIL });
    const code = codeIn();
    const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, "0");
    const res = await post("/console/sign-in/verify", pre.cookie, {
      _csrf: csrfIn(started.text),
      email: OPS_EMAIL,
      code: wrong,
    });
    expect(res.status).toBe(401);
    expect(res.text).toContain("That code is not valid");
    expect(cookieOf(res, "console_session")).toBeNull();
  });

  it("an address that may not sign in sees the same code page, and no code is sent", async () => {
    const pre = await signInPage();
    const res = await post("/console/sign-in", pre.cookie, { _csrf: pre.csrf, email: "visitor@example.com" });
    expect(res.status).toBe(200);
    expect(res.text).toContain('action="/console/sign-in/verify"');
    expect(log.mock.calls.flat().join("\n")).not.toMatch(/sign-in code is/);
  });

  it("the pre-sign-in POST without the pre-session cookie is 403 and sends no code", async () => {
    const pre = await signInPage();
    const res = await post("/console/sign-in", null, { _csrf: pre.csrf, email: OPS_EMAIL });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "csrf_token_invalid" });
    expect(log.mock.calls.flat().join("\n")).not.toMatch(/sign-in code is/);
  });

  it("the pre-sign-in POST with the cookie but a missing or foreign _csrf is 403", async () => {
    const mine = await signInPage();
    const theirs = await signInPage();
    expect((await post("/console/sign-in", mine.cookie, { email: OPS_EMAIL })).status).toBe(403);
    expect((await post("/console/sign-in", mine.cookie, { _csrf: theirs.csrf, email: OPS_EMAIL })).status).toBe(403);
    expect(log.mock.calls.flat().join("\n")).not.toMatch(/sign-in code is/);
  });

  it("an address that is not one is 400 at both steps and keys no rate-limit counter (a 60,000-character one included)", async () => {
    const pre = await signInPage();
    const long = `${"a".repeat(60_000)}@example.com`;
    const before = (await env.DB.prepare("SELECT COUNT(*) AS n FROM rate_limits").first<{ n: number }>())!.n;
    for (const [path, fields] of [
      ["/console/sign-in", { email: long }],
      ["/console/sign-in/verify", { email: long, code: "123456" }],
      ["/console/sign-in/verify", { email: "not-an-address", code: "123456" }],
    ] as const) {
      const res = await post(path, pre.cookie, { _csrf: pre.csrf, ...fields });
      expect(res.status, path).toBe(400);
      expect(res.text).toContain("Enter a valid e-mail address.");
    }
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM rate_limits").first<{ n: number }>())!.n).toBe(before);
  });

  it("an address whose tries are used up gets a 429 page with Retry-After, back at the e-mail step", async () => {
    const pre = await signInPage();
    const email = `locked-${crypto.randomUUID()}@example.com`;
    const attempt = () =>
      api("POST", "/console/sign-in/verify", {
        body: new URLSearchParams({ _csrf: pre.csrf, email, code: "000000" }).toString(),
        headers: {
          ...FORM,
          cookie: pre.cookie,
          "cf-connecting-ip": `203.0.113.${Math.floor(Math.random() * 250) + 1}`,
        },
      });
    // Ten tries per address in 15 minutes (decisions.md); the eleventh is refused whatever the code.
    for (let i = 0; i < 10; i++) expect((await attempt()).status).toBe(401);
    const locked = await attempt();
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(locked.text).toContain("Too many attempts");
    expect(locked.text).not.toContain("That code is not valid");
    expect(locked.text).toContain('action="/console/sign-in"');
  });

  it("the verify POST without the pre-session cookie is 403 even with the right code", async () => {
    const pre = await signInPage();
    const started = await post("/console/sign-in", pre.cookie, { _csrf: pre.csrf, email: OPS_EMAIL });
    const res = await post("/console/sign-in/verify", null, {
      _csrf: csrfIn(started.text),
      email: OPS_EMAIL,
      code: codeIn(),
    });
    expect(res.status).toBe(403);
    expect(cookieOf(res, "console_session")).toBeNull();
  });
});

describe("signed-in pages", () => {
  it.each([
    ["/console/ui", "Overview", "Paid volume by hour"],
    ["/console/ui/merchants", "Merchants", "Register a merchant"],
    ["/console/ui/agents", "Agents", "Create an agent"],
    ["/console/ui/approvals", "Approvals", "<table"],
    ["/console/ui/webhooks", "Webhooks", "Add an endpoint"],
    ["/console/ui/kyt", "KYT screening", 'name="address"'],
    ["/console/ui/transactions", "Transactions", 'id="chain-badge"'],
    ["/console/ui/users", "Console users", OPS_EMAIL],
  ])("GET %s renders 200 HTML titled %j", async (path, title, content) => {
    const { cookie } = await session();
    const res = await page(path, cookie);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.text).toMatch(/^<!DOCTYPE html>|^<html/i);
    expect(res.text).toContain(`<title>${title} · agent-pay console</title>`);
    expect(res.text).toContain(`<h1>${title}</h1>`);
    expect(res.text).toContain(content);
    // The header shows who is signed in and offers sign-out with the CSRF token.
    expect(res.text).toContain(OPS_EMAIL);
    expect(res.text).toContain('action="/console/sign-out"');
    csrfIn(res.text);
  });

  it("the overview, merchants, agents, agent and approvals pages show real data", async () => {
    const { cookie } = await session();
    const merchant = await createMerchant({ name: "Pages Data Shop" });
    const agent = await createAgent({
      name: "pages-data-agent",
      credit: 10_000,
      policy: { approvalThresholdUsdCents: 2_000 },
    });
    const paid = await createCharge(merchant.apiKey, 1_234);
    expect((await payCharge(agent.apiKey, paid.chargeId)).status).toBe(200);
    const held = await createCharge(merchant.apiKey, 5_000);
    const hold = await payCharge(agent.apiKey, held.chargeId);
    expect(hold.status).toBe(402);

    expect((await page("/console/ui/merchants", cookie)).text).toContain("Pages Data Shop");
    const agents = await page("/console/ui/agents", cookie);
    expect(agents.text).toContain("pages-data-agent");
    expect(agents.text).toContain("$87.66");
    const detail = await page(`/console/ui/agents/${agent.agentId}`, cookie);
    expect(detail.status).toBe(200);
    expect(detail.text).toContain("<h1>Agent pages-data-agent</h1>");
    expect(detail.text).toMatch(/id="agent-balance">\$87\.66</);
    // Its payment's time in UTC, readable, with the exact value on hover (the page's script shows the viewer's zone).
    expect(detail.text).toMatch(
      /<time datetime="\d{4}-\d\d-\d\dT[\d:.]+Z" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC" data-local="datetime">\d{4}-\d\d-\d\d \d\d:\d\d UTC<\/time>/,
    );
    // The policy's form shows its limits in dollars.
    expect(detail.text).toMatch(/name="approvalThresholdUsd"[^>]*value="20\.00"/);
    expect(detail.text).toContain(paid.chargeId);
    const approvals = await page("/console/ui/approvals", cookie);
    expect(approvals.text).toContain(`id="approval-${hold.body.approvalId}"`);
    expect(approvals.text).toContain("$50.00");
    const overview = await page("/console/ui", cookie);
    expect(overview.text).toContain("<svg");
    expect(overview.text).toContain("$12.34");
    expect(overview.text).toContain('<span class="muted">1 payment</span>');
  });

  it("what users typed, and the notice in the address, is escaped, never markup", async () => {
    const { cookie, csrf } = await session();
    const name = `<img src=x onerror="alert(1)">Evil & Co`;
    const created = await post("/console/ui/merchants", cookie, { _csrf: csrf, name });
    expect(created.status).toBe(200);
    const list = await page("/console/ui/merchants", cookie);
    expect(list.text).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;Evil &amp; Co");
    expect(list.text).not.toContain("<img src=x");
    const notice = await page(`/console/ui?notice=${encodeURIComponent("<script>alert(1)</script>")}`, cookie);
    expect(notice.text).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(notice.text).not.toContain("<script>alert(1)");
  });

  it("an unknown agent's page is 404", async () => {
    const { cookie } = await session();
    expect((await page("/console/ui/agents/agent_doesnotexist", cookie)).status).toBe(404);
  });
});

describe("CSRF on page forms", () => {
  it("a merchant form without the right _csrf is 403 and creates no merchant", async () => {
    const mine = await session();
    const theirs = await session();
    expect(theirs.csrf).not.toBe(mine.csrf);
    const forgeries: Record<string, string>[] = [
      { name: "Forged Shop" },
      { name: "Forged Shop", _csrf: "" },
      { name: "Forged Shop", _csrf: "nope" },
      { name: "Forged Shop", _csrf: theirs.csrf },
    ];
    for (const fields of forgeries) {
      const res = await post("/console/ui/merchants", mine.cookie, fields);
      expect(res.status, JSON.stringify(fields)).toBe(403);
      expect(res.body).toEqual({ error: "csrf_token_invalid" });
      expect(res.text).not.toContain("sk_mch_");
    }
    expect(await rowsWith("merchants", "name", "Forged Shop")).toBe(0);
    expect((await page("/console/ui/merchants", mine.cookie)).text).not.toContain("Forged Shop");
  });

  it.each([
    ["/console/ui/agents", { name: "forged-agent", credit: "50" }, ["agents", "name", "forged-agent"]],
    ["/console/ui/users", { email: "forged-user@example.com" }, ["console_users", "email", "forged-user@example.com"]],
    [
      "/console/ui/webhooks",
      { url: "https://forged.example.com/hook" },
      ["webhook_endpoints", "url", "https://forged.example.com/hook"],
    ],
  ] as const)(
    "POST %s without _csrf is 403 and writes nothing; with it, the row is written",
    async (path, fields, [table, column, value]) => {
      const { cookie, csrf } = await session();
      const res = await post(path, cookie, fields);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: "csrf_token_invalid" });
      expect(await rowsWith(table, column, value)).toBe(0);
      // The same form with its token is accepted (so the check above looks where the write would land).
      const accepted = await post(path, cookie, { ...fields, _csrf: csrf });
      expect([200, 303]).toContain(accepted.status);
      expect(await rowsWith(table, column, value)).toBe(1);
    },
  );

  it("granting an approval without _csrf is 403 and the charge stays pending", async () => {
    const { cookie, csrf } = await session();
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 10_000, policy: { approvalThresholdUsdCents: 1_000 } });
    const charge = await createCharge(merchant.apiKey, 2_000);
    const hold = await payCharge(agent.apiKey, charge.chargeId);
    expect(hold.status).toBe(402);
    const forged = await post(`/console/ui/approvals/${hold.body.approvalId}/grant`, cookie, {});
    expect(forged.status).toBe(403);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("pending");
    // With the token it goes through.
    const granted = await post(`/console/ui/approvals/${hold.body.approvalId}/grant`, cookie, { _csrf: csrf });
    expect(granted.status).toBe(303);
    expect(decodeURIComponent(granted.headers.get("location")!)).toContain(`charge ${charge.chargeId} is paid`);
    expect((await api("GET", `/charges/${charge.chargeId}`)).body.status).toBe("paid");
  });

  it("sign-out without _csrf is 403 and the session stays valid", async () => {
    const { cookie, token } = await session();
    expect((await post("/console/sign-out", cookie, {})).status).toBe(403);
    expect((await page("/console/ui", cookie)).status).toBe(200);
    expect((await api("GET", "/console/agents", { token })).status).toBe(200);
  });

  it("with the right _csrf a merchant is created and its sk_mch_ key appears once, then never again", async () => {
    const { cookie } = await session();
    const form = await page("/console/ui/merchants", cookie);
    const created = await post("/console/ui/merchants", cookie, {
      name: "Form Shop",
      category: "data",
      _csrf: csrfIn(form.text),
    });
    expect(created.status).toBe(200);
    expect(await rowsWith("merchants", "name", "Form Shop")).toBe(1);
    const keys = created.text.match(/sk_mch_[A-Za-z0-9_-]+/g) ?? [];
    expect(keys).toHaveLength(1);
    expect(created.text).toContain('id="merchant-key"');
    expect(created.text).toContain("shown once");

    // The key shown is the merchant's real key.
    const me = await api("GET", "/merchant/me", { token: keys[0]! });
    expect(me.status).toBe(200);
    expect(me.body.merchant).toMatchObject({ name: "Form Shop" });
    expect(created.text).toContain(me.body.merchant.id);
    expect(
      await env.DB.prepare("SELECT category FROM merchants WHERE id = ?").bind(me.body.merchant.id).first("category"),
    ).toBe("data");

    const again = await page("/console/ui/merchants", cookie);
    expect(again.text).toContain("Form Shop");
    expect(again.text).not.toContain(keys[0]);
    expect(again.text).not.toContain("sk_mch_");
  });

  it("with the right _csrf an agent is created with its policy and credit, and its key is shown once", async () => {
    const { cookie, csrf } = await session();
    const created = await post("/console/ui/agents", cookie, {
      _csrf: csrf,
      name: "form-agent",
      approvalThresholdUsd: "10",
      credit: "25.00",
    });
    expect(created.status).toBe(200);
    const keys = created.text.match(/svc_sk_[A-Za-z0-9_-]+/g) ?? [];
    expect(keys).toHaveLength(1);
    const balance = await api("GET", "/balance", { token: keys[0]! });
    expect(balance.status).toBe(200);
    expect(balance.body.balanceMinor).toBe(2_500);
    expect((await page("/console/ui/agents", cookie)).text).not.toContain(keys[0]);
  });

  it("the policy form keeps the x402 hosts an agent may pay, shows them again, and refuses one that is no host name", async () => {
    const { cookie, csrf, token } = await session();
    const agent = await createAgent({ policy: { allowedX402Hosts: ["kept.example"] } });
    const shown = await page(`/console/ui/agents/${agent.agentId}`, cookie);
    expect(shown.text).toContain('value="kept.example"');
    const saved = await post(`/console/ui/agents/${agent.agentId}/policy`, cookie, {
      _csrf: csrf,
      allowedX402Hosts: "API.Example, *",
    });
    expect(saved.status).toBe(303);
    const policy = (await api("GET", `/console/agents/${agent.agentId}`, { token })).body.policy;
    expect(policy.allowedX402Hosts).toEqual(["api.example", "*"]);
    const refused = await post(`/console/ui/agents/${agent.agentId}/policy`, cookie, {
      _csrf: csrf,
      allowedX402Hosts: "https://api.example/path",
    });
    expect(decodeURIComponent(refused.headers.get("location")!)).toContain("Policy not saved");
    expect((await api("GET", `/console/agents/${agent.agentId}`, { token })).body.policy).toEqual(policy);
  });

  it("the forms refuse what the API refuses, and store nothing: a later read of the agent still works", async () => {
    const { cookie, csrf, token } = await session();
    const agent = await createAgent({ credit: 1_000 });
    const policyBefore = (await api("GET", `/console/agents/${agent.agentId}`, { token })).body.policy;
    // Over the API's largest amount, a zero limit, a category over 64 characters: PUT /console/agents/:id/policy answers 400 to each.
    const refusedByApi: [Record<string, string>, Record<string, unknown>][] = [
      [{ dailyLimitUsd: "1000000000.01" }, { dailyLimitUsdCents: 100_000_000_001 }],
      [{ maxPerTransactionUsd: "0" }, { maxPerTransactionUsdCents: 0 }],
      [{ allowedCategories: "x".repeat(65) }, { allowedCategories: ["x".repeat(65)] }],
    ];
    for (const [fields, json] of refusedByApi) {
      expect((await api("PUT", `/console/agents/${agent.agentId}/policy`, { token, body: json })).status).toBe(400);
      const saved = await post(`/console/ui/agents/${agent.agentId}/policy`, cookie, { _csrf: csrf, ...fields });
      expect(saved.status).toBe(303);
      expect(decodeURIComponent(saved.headers.get("location")!)).toContain("Policy not saved");
    }
    expect((await api("GET", `/console/agents/${agent.agentId}`, { token })).body.policy).toEqual(policyBefore);
    expect((await api("GET", "/console/agents", { token })).status).toBe(200);

    const credited = await post(`/console/ui/agents/${agent.agentId}/credit`, cookie, {
      _csrf: csrf,
      amount: "99999999999999999999",
    });
    expect(decodeURIComponent(credited.headers.get("location")!)).toContain("Credit not applied");
    expect(await balanceOf(agent.apiKey)).toBe(1_000);

    const before = await rowsWith("agents", "name", "too-rich-agent");
    const refused = await post("/console/ui/agents", cookie, {
      _csrf: csrf,
      name: "too-rich-agent",
      credit: "99999999999999999999",
    });
    expect(refused.status).toBe(200);
    expect(refused.text).toContain("Check the form");
    expect(refused.text).not.toContain("svc_sk_");
    expect(await rowsWith("agents", "name", "too-rich-agent")).toBe(before);

    const longName = "m".repeat(201);
    const merchant = await post("/console/ui/merchants", cookie, { _csrf: csrf, name: longName });
    expect(merchant.text).toContain("A merchant needs a name");
    expect(await rowsWith("merchants", "name", longName)).toBe(0);

    const endpoint = await post("/console/ui/webhooks", cookie, {
      _csrf: csrf,
      url: "http://127.0.0.1:9/hook",
      merchantId: "mch_nobody",
    });
    expect(endpoint.text).toContain("No such merchant");
    expect(await rowsWith("webhook_endpoints", "merchant_id", "mch_nobody")).toBe(0);
  });

  it.each([
    [
      "agents",
      "roll an agent's key",
      async () => (await createAgent()).agentId,
      (id: string) => `/console/ui/agents/${id}/keys`,
      { graceSeconds: "0" },
    ],
    [
      "merchants",
      "roll a merchant's key",
      async () => (await createMerchant()).merchantId,
      (id: string) => `/console/ui/merchants/${id}/keys`,
      { graceSeconds: "0" },
    ],
    [
      "agents",
      "freeze an agent",
      async () => (await createAgent()).agentId,
      (id: string) => `/console/ui/agents/${id}/freeze`,
      { reason: "forged" },
    ],
  ] as const)("POST to %s without _csrf (%s) is 403 and changes nothing", async (table, _what, make, path, fields) => {
    const { cookie } = await session();
    const id = await make();
    const before = await env.DB.prepare(
      `SELECT api_key_hash AS hash, previous_api_key_hash AS previous, ${table === "agents" ? "frozen_at" : "NULL"} AS frozenAt FROM ${table} WHERE id = ?`,
    )
      .bind(id)
      .first();
    for (const forged of [fields, { ...fields, _csrf: "nope" }]) {
      const res = await post(path(id), cookie, forged);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: "csrf_token_invalid" });
      expect(res.text).not.toMatch(/svc_sk_|sk_mch_/);
    }
    const after = await env.DB.prepare(
      `SELECT api_key_hash AS hash, previous_api_key_hash AS previous, ${table === "agents" ? "frozen_at" : "NULL"} AS frozenAt FROM ${table} WHERE id = ?`,
    )
      .bind(id)
      .first();
    expect(after).toEqual(before);
  });

  it("unfreezing without _csrf is 403 and the agent stays frozen", async () => {
    const { cookie, csrf } = await session();
    const agent = await createAgent();
    expect((await post(`/console/ui/agents/${agent.agentId}/freeze`, cookie, { _csrf: csrf })).status).toBe(303);
    const forged = await post(`/console/ui/agents/${agent.agentId}/unfreeze`, cookie, {});
    expect(forged.status).toBe(403);
    expect(forged.body).toEqual({ error: "csrf_token_invalid" });
    expect((await api("GET", "/balance", { token: agent.apiKey })).body.frozen).toBe(true);
  });

  it("signing out from the page revokes the session: the cookie is cleared and the token no longer works", async () => {
    const { cookie, token, csrf } = await session();
    const out = await post("/console/sign-out", cookie, { _csrf: csrf });
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/console/sign-in");
    expect(cookieOf(out, "console_session")?.value ?? "").toBe("");
    const after = await page("/console/ui", cookie);
    expect(after.status).toBe(303);
    expect(after.headers.get("location")).toBe("/console/sign-in");
    expect((await api("GET", "/console/agents", { token })).status).toBe(401);
  });
});

/** Polls `check` until it holds, for at most the 5 s the key and freeze changes promise; true if it held. */
async function within5s(check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const keysIn = (html: string, prefix: "svc_sk_" | "sk_mch_") =>
  html.match(new RegExp(`${prefix}[A-Za-z0-9_-]+`, "g")) ?? [];
const noticeOf = (res: ApiResponse) => decodeURIComponent(res.headers.get("location") ?? "");
/** The agent list's name cell of one agent: its link and what follows, up to the cell's end. */
const listedName = async (cookie: string, agentId: string) => {
  const html = (await page("/console/ui/agents", cookie)).text;
  const cell = html.slice(html.indexOf(`href="/console/ui/agents/${agentId}"`));
  return cell.slice(0, cell.indexOf("</td>"));
};
const expiresShown = (html: string) => /<time id="old-key-expires" datetime="([^"]+)"/.exec(html)?.[1];

describe("keys and kill switches from the pages", () => {
  it("the agent page offers a key roll with a grace choice (1 day by default) and a freeze with a reason", async () => {
    const { cookie } = await session();
    const agent = await createAgent({ name: "switches-agent" });
    const res = await page(`/console/ui/agents/${agent.agentId}`, cookie);
    expect(res.text).toContain(`action="/console/ui/agents/${agent.agentId}/keys"`);
    expect(res.text).toMatch(/<select id="k-grace" name="graceSeconds"/);
    expect(res.text).toMatch(/<option value="86400" selected="">/);
    for (const seconds of ["0", "3600", "604800"]) expect(res.text).toContain(`<option value="${seconds}">`);
    expect(res.text).toContain(`action="/console/ui/agents/${agent.agentId}/freeze"`);
    expect(res.text).toContain('name="reason"');
    expect(res.text).toContain('id="agent-status" class="ok">Active<');
    expect(res.text).not.toContain('id="frozen-banner"');
    expect(res.text).not.toContain("/unfreeze");
  });

  it("rolling an agent's key with no grace shows the new key once; the old key answers 401 within 5 s and the new one works", async () => {
    const { cookie, csrf } = await session();
    const agent = await createAgent({ name: "roll-page-agent", credit: 700 });
    expect((await api("GET", "/balance", { token: agent.apiKey })).status).toBe(200);

    const rolled = await post(`/console/ui/agents/${agent.agentId}/keys`, cookie, { _csrf: csrf, graceSeconds: "0" });
    expect(rolled.status).toBe(200);
    expect(rolled.text).toContain("<h1>Agent roll-page-agent</h1>");
    expect(rolled.text).toContain("shown once");
    const keys = keysIn(rolled.text, "svc_sk_");
    expect(keys).toHaveLength(1);
    const newKey = keys[0]!;
    expect(newKey).toMatch(/^svc_sk_[A-Za-z0-9_-]{43}$/);
    expect(rolled.text).toContain("The old key has stopped working");
    expect(Date.parse(expiresShown(rolled.text)!)).toBeLessThanOrEqual(Date.now());

    expect(await within5s(async () => (await api("GET", "/balance", { token: agent.apiKey })).status === 401)).toBe(
      true,
    );
    const balance = await api("GET", "/balance", { token: newKey });
    expect(balance.status).toBe(200);
    expect(balance.body).toMatchObject({ agentId: agent.agentId, balanceMinor: 700 });
    // Shown once: the agent's page never shows it again.
    expect((await page(`/console/ui/agents/${agent.agentId}`, cookie)).text).not.toContain("svc_sk_");
    const audit = await env.DB.prepare("SELECT data FROM audit_events WHERE type = 'agent.key_rolled' AND agent_id = ?")
      .bind(agent.agentId)
      .first<{ data: string }>();
    expect(JSON.parse(audit!.data)).toMatchObject({ by: OPS_EMAIL, graceSeconds: 0 });
  });

  it("with the default grace the old key keeps working for a day, and the page says until when", async () => {
    const { cookie, csrf } = await session();
    const agent = await createAgent();
    const before = Date.now();
    const rolled = await post(`/console/ui/agents/${agent.agentId}/keys`, cookie, {
      _csrf: csrf,
      graceSeconds: "86400",
    });
    expect(rolled.status).toBe(200);
    expect(rolled.text).toContain("The old key keeps working until");
    const until = Date.parse(expiresShown(rolled.text)!);
    expect(until).toBeGreaterThanOrEqual(before + 86_400_000 - 1_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 86_400_000 + 1_000);
    const newKey = keysIn(rolled.text, "svc_sk_")[0]!;
    expect((await api("GET", "/balance", { token: agent.apiKey })).status).toBe(200);
    expect((await api("GET", "/balance", { token: newKey })).status).toBe(200);
  });

  it("a grace the API refuses rolls nothing; an unknown agent or merchant is 404", async () => {
    const { cookie, csrf, token } = await session();
    const agent = await createAgent();
    const hash = () =>
      env.DB.prepare("SELECT api_key_hash FROM agents WHERE id = ?").bind(agent.agentId).first("api_key_hash");
    const stored = await hash();
    for (const graceSeconds of ["604801", "-1", "1.5", "an hour"]) {
      const body = /^-?\d+(\.\d+)?$/.test(graceSeconds) ? { graceSeconds: Number(graceSeconds) } : { graceSeconds };
      expect((await api("POST", `/console/agents/${agent.agentId}/keys`, { token, body })).status, graceSeconds).toBe(
        400,
      );
      const res = await post(`/console/ui/agents/${agent.agentId}/keys`, cookie, { _csrf: csrf, graceSeconds });
      expect(res.status, graceSeconds).toBe(303);
      expect(noticeOf(res)).toContain("Key not rolled");
      expect(res.text).not.toContain("svc_sk_");
    }
    expect(await hash()).toBe(stored);
    expect((await api("GET", "/balance", { token: agent.apiKey })).status).toBe(200);
    expect(
      (await post("/console/ui/agents/agent_doesnotexist/keys", cookie, { _csrf: csrf, graceSeconds: "0" })).status,
    ).toBe(404);
    expect(
      (await post("/console/ui/merchants/mch_doesnotexist/keys", cookie, { _csrf: csrf, graceSeconds: "0" })).status,
    ).toBe(404);
    expect((await post("/console/ui/agents/agent_doesnotexist/freeze", cookie, { _csrf: csrf })).status).toBe(404);
    expect((await post("/console/ui/agents/agent_doesnotexist/unfreeze", cookie, { _csrf: csrf })).status).toBe(404);
  });

  it("freezing with a reason shows the banner and the list badge, and the agent's payments answer 403 agent_frozen; unfreezing restores them", async () => {
    const { cookie, csrf } = await session();
    const merchant = await createMerchant();
    const agent = await createAgent({ name: "freeze-page-agent", credit: 1_000 });
    const charge = await createCharge(merchant.apiKey, 250);

    const frozen = await post(`/console/ui/agents/${agent.agentId}/freeze`, cookie, {
      _csrf: csrf,
      reason: "card <b>stolen</b>",
    });
    expect(frozen.status).toBe(303);
    expect(frozen.headers.get("location")).toMatch(new RegExp(`^/console/ui/agents/${agent.agentId}\\?notice=`));
    expect(noticeOf(frozen)).toContain("Frozen");

    const detail = await page(`/console/ui/agents/${agent.agentId}`, cookie);
    expect(detail.text).toContain('id="frozen-banner"');
    expect(detail.text).toContain('id="frozen-reason">card &lt;b&gt;stolen&lt;/b&gt;<');
    expect(detail.text).toContain('id="agent-status" class="bad">Frozen<');
    expect(detail.text).toContain(`action="/console/ui/agents/${agent.agentId}/unfreeze"`);
    expect(detail.text).not.toContain(`action="/console/ui/agents/${agent.agentId}/freeze"`);
    expect(await listedName(cookie, agent.agentId)).toContain('class="badge frozen"');

    const refused = await payCharge(agent.apiKey, charge.chargeId);
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: "agent_frozen" });
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    const audit = await env.DB.prepare("SELECT data FROM audit_events WHERE type = 'agent.frozen' AND agent_id = ?")
      .bind(agent.agentId)
      .first<{ data: string }>();
    expect(JSON.parse(audit!.data)).toEqual({ by: OPS_EMAIL, reason: "card <b>stolen</b>" });

    // Freezing again changes nothing and says so.
    expect(noticeOf(await post(`/console/ui/agents/${agent.agentId}/freeze`, cookie, { _csrf: csrf }))).toContain(
      "already frozen",
    );

    const unfrozen = await post(`/console/ui/agents/${agent.agentId}/unfreeze`, cookie, { _csrf: csrf });
    expect(unfrozen.status).toBe(303);
    expect(noticeOf(unfrozen)).toContain("Unfrozen");
    const after = await page(`/console/ui/agents/${agent.agentId}`, cookie);
    expect(after.text).not.toContain('id="frozen-banner"');
    expect(after.text).toContain('id="agent-status" class="ok">Active<');
    expect(await listedName(cookie, agent.agentId)).not.toContain("frozen");
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    expect(await balanceOf(agent.apiKey)).toBe(750);
  });

  it("a freeze reason the API refuses (over 200 characters) freezes nothing", async () => {
    const { cookie, csrf } = await session();
    const agent = await createAgent();
    const res = await post(`/console/ui/agents/${agent.agentId}/freeze`, cookie, {
      _csrf: csrf,
      reason: "r".repeat(201),
    });
    expect(res.status).toBe(303);
    expect(noticeOf(res)).toContain("Not frozen");
    expect((await api("GET", "/balance", { token: agent.apiKey })).body.frozen).toBe(false);
  });

  it("rolling a merchant's key from the merchants page shows it once; the old key answers 401 within 5 s", async () => {
    const { cookie, csrf } = await session();
    const merchant = await createMerchant({ name: "Roll Page Shop" });
    const list = await page("/console/ui/merchants", cookie);
    expect(list.text).toContain(`action="/console/ui/merchants/${merchant.merchantId}/keys"`);

    const rolled = await post(`/console/ui/merchants/${merchant.merchantId}/keys`, cookie, {
      _csrf: csrf,
      graceSeconds: "0",
    });
    expect(rolled.status).toBe(200);
    expect(rolled.text).toContain(`New API key for Roll Page Shop (${merchant.merchantId})`);
    const keys = keysIn(rolled.text, "sk_mch_");
    expect(keys).toHaveLength(1);
    expect(rolled.text).toContain('id="old-key-expires"');
    expect(
      await within5s(async () => (await api("GET", "/merchant/me", { token: merchant.apiKey })).status === 401),
    ).toBe(true);
    const me = await api("GET", "/merchant/me", { token: keys[0]! });
    expect(me.status).toBe(200);
    expect(me.body.merchant.id).toBe(merchant.merchantId);
    expect((await page("/console/ui/merchants", cookie)).text).not.toContain("sk_mch_");
  });
});
