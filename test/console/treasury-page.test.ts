import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { usdOfBaseUnits } from "../../src/console/ui/layout";
import { TreasuryChart } from "../../src/console/ui/pages/treasury-chart";
import type { CheckDetail } from "../../src/treasury/history";
import { api, consoleToken } from "../helpers/api";
import { createAgent } from "../helpers/factories";
import { v1Request } from "../helpers/paywall-terms";
import { freshSender, sendTokens } from "../helpers/tokens";
import { chain, publicClient } from "../helpers/x402";

// The console's Treasury page. In this project the settlement address holds the local chain's
// float, so every check here is a surplus; shortfalls and the banner are tested in
// test/treasury/treasury.test.ts, whose Worker has a treasury of its own.

const FORM = { "content-type": "application/x-www-form-urlencoded" };

async function session() {
  const cookie = `console_session=${await consoleToken()}`;
  const overview = await api("GET", "/console/ui", { headers: { cookie } });
  const csrf = /name="_csrf" value="([^"]*)"/.exec(overview.text)?.[1];
  expect(csrf, "a _csrf field in the page").toBeTruthy();
  return { cookie, csrf: csrf! };
}

const checkNow = async (csrf?: string) => {
  const s = await session();
  return api("POST", "/console/ui/treasury/check", {
    body: new URLSearchParams({ _csrf: csrf ?? s.csrf }).toString(),
    headers: { ...FORM, cookie: s.cookie },
  });
};

const stat = (html: string, id: string) => new RegExp(`id="${id}"[^>]*>[^<]*<b>([^<]*)</b>`).exec(html)?.[1];

/** A stored check for the chart, in dollars. */
const check = (at: string, held: number, expected: number, status = "balanced"): CheckDetail => ({
  at,
  asOfBlock: 1,
  status: status as CheckDetail["status"],
  totalBaseUnits: String(BigInt(held) * 1_000_000n),
  expectedBaseUnits: String(BigInt(expected) * 1_000_000n),
  differenceBaseUnits: String(BigInt(held - expected) * 1_000_000n),
  settlementBaseUnits: "0",
  depositAddressesBaseUnits: "0",
  onChainInMinor: 0,
  onChainOutMinor: 0,
  pendingOutMinor: 0,
  inTransitMinor: 0,
  addressesRead: 0,
  floatBaseUnits: "0",
  onChainInBaseUnits: "0",
  onChainOutBaseUnits: "0",
  pendingOutBaseUnits: "0",
});

describe("the Treasury page", () => {
  it("needs a console session, and its Check now form the page's CSRF token", async () => {
    const res = await api("GET", "/console/ui/treasury");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/sign-in");
    const forged = await checkNow("not-the-token");
    expect(forged.status).toBe(403);
    expect(forged.body).toEqual({ error: "csrf_token_invalid" });
  });

  it("checks now, then shows the latest check's figures, the history as a chart in dollars, and the table", async () => {
    const checked = await checkNow();
    expect(checked.status).toBe(303);
    const location = checked.headers.get("location")!;
    expect(location).toMatch(/^\/console\/ui\/treasury\?notice=Checked%20at%20block%20\d+%3A%20surplus\.$/);
    const block = Number(/block%20(\d+)/.exec(location)![1]);
    const stored = await env.DB.prepare(
      "SELECT total_base_units AS total, expected_base_units AS expected FROM treasury_checks WHERE as_of_block = ? ORDER BY id DESC LIMIT 1",
    )
      .bind(block)
      .first<{ total: string; expected: string }>();
    expect(stored).not.toBeNull();

    const res = await api("GET", location, { headers: { cookie: (await session()).cookie } });
    expect(res.status).toBe(200);
    expect(res.text).toContain('<a href="/console/ui/treasury" class="on">Treasury</a>');
    expect(res.text).toContain(`Checked at block ${block}: surplus.`);
    expect(res.text).toContain('id="treasury-chart"');
    expect(res.text).toContain('id="chart-holdings"');
    expect(res.text).toContain('id="chart-expected"');
    expect(res.text).toMatch(/class="y-label">\$[\d,]+\.\d\d</);
    expect(res.text).toMatch(/<table id="treasury-checks">[\s\S]*<span class="badge warn">surplus<\/span>/);
    // No banner: a surplus is not short.
    expect(res.text).not.toContain('id="treasury-shortfall"');
    // The latest figures are the latest check's, exact to the base unit.
    const latest = await env.DB.prepare(
      "SELECT total_base_units AS total, expected_base_units AS expected FROM treasury_checks ORDER BY id DESC LIMIT 1",
    ).first<{ total: string; expected: string }>();
    const shown = { total: stat(res.text, "treasury-total"), expected: stat(res.text, "treasury-expected") };
    // Another file may have checked in between; the page shows one of the two.
    expect([
      { total: usdOfBaseUnits(stored!.total), expected: usdOfBaseUnits(stored!.expected) },
      { total: usdOfBaseUnits(latest!.total), expected: usdOfBaseUnits(latest!.expected) },
    ]).toContainEqual(shown);
  });

  it("books a funding from its form: the float and the fundings list show it; a refusal says why, nothing booked", async () => {
    const sender = await freshSender(1_000_000n);
    const { hash } = await sendTokens(sender, chain().payTo, 12_345n);
    // Two confirmations are asked (DEPOSIT_CONFIRMATIONS): a block on top.
    await publicClient().request({ method: "anvil_mine" as never, params: ["0x1"] as never });
    const s = await session();
    const submit = (transaction: string, csrf = s.csrf) =>
      api("POST", "/console/ui/treasury/fundings", {
        body: new URLSearchParams({ _csrf: csrf, transaction }).toString(),
        headers: { ...FORM, cookie: s.cookie },
      });
    expect((await submit(hash, "not-the-token")).status).toBe(403);

    const booked = await submit(hash);
    expect(booked.status).toBe(303);
    const notice = `Booked $0.012345 from ${hash.toLowerCase()} as the operator's float.`;
    expect(booked.headers.get("location")).toBe(`/console/ui/treasury?notice=${encodeURIComponent(notice)}`);
    const row = await env.DB.prepare(
      "SELECT amount_base_units AS a, booked_by AS b FROM treasury_fundings WHERE tx_hash = ?",
    )
      .bind(hash.toLowerCase())
      .first();
    expect(row).toEqual({ a: "12345", b: "ops@example.com" });

    const page = await api("GET", booked.headers.get("location")!, { headers: { cookie: s.cookie } });
    expect(page.text).toContain(notice.replace("'", "&#39;"));
    expect(page.text).toMatch(
      new RegExp(`<table id="treasury-fundings-list">[\\s\\S]*title="${hash.toLowerCase()}"[\\s\\S]*\\$0\\.012345`),
    );
    // The float of the latest check, once a check has run since the booking (another file may check in between).
    await checkNow();
    const latestFloat = async () =>
      (await env.DB.prepare("SELECT float_base_units AS f FROM treasury_checks ORDER BY id DESC LIMIT 1").first<string>(
        "f",
      ))!;
    const before = await latestFloat();
    const shown = stat(
      (await api("GET", "/console/ui/treasury", { headers: { cookie: s.cookie } })).text,
      "treasury-float",
    );
    expect([before, await latestFloat()].map((f) => usdOfBaseUnits(f))).toContain(shown);
    expect(BigInt(before)).toBeGreaterThanOrEqual(12_345n);

    const again = await submit(hash);
    expect(again.status).toBe(200);
    expect(again.text).toContain("(funding_already_booked)");
    const bad = await submit("0x1234");
    expect(bad.status).toBe(200);
    expect(bad.text).toContain("Enter a transaction hash: 0x and 64 hex digits.");
    expect(bad.text).toContain('value="0x1234"');
    const none = await env.DB.prepare("SELECT COUNT(*) AS n FROM treasury_fundings WHERE tx_hash = ?")
      .bind(hash.toLowerCase())
      .first<number>("n");
    expect(none).toBe(1);
  });

  it("charts holdings against the ledger with dollar axes, marking a shortfall red", async () => {
    const svg = (
      await TreasuryChart({
        checks: [
          check("2026-01-01T00:02:00.000Z", 990, 1000, "shortfall"),
          check("2026-01-01T00:01:00.000Z", 1000, 1000),
          check("2026-01-01T00:00:00.000Z", 1000, 1000),
        ],
      })
    ).toString();
    const labels = [...svg.matchAll(/class="y-label">([^<]*)</g)].map((m) => m[1]);
    expect(labels).toEqual(["$990.00", "$995.00", "$1,000.00"]);
    expect(svg).toContain("2026-01-01 00:00 UTC");
    expect(svg).toContain("2026-01-01 00:02 UTC");
    expect(svg).toContain("3 checks, oldest to newest");
    const points = (id: string) =>
      new RegExp(`id="${id}" points="([^"]*)"`)
        .exec(svg)![1]!
        .split(" ")
        .map((p) => p.split(",").map(Number));
    const held = points("chart-holdings");
    const expected = points("chart-expected");
    expect(held).toHaveLength(3);
    // Oldest on the left; the last check holds less, so its point sits lower (a larger y) than expected's.
    expect(held[0]![0]).toBeLessThan(held[2]![0]!);
    expect(held[2]![1]).toBeGreaterThan(expected[2]![1]!);
    expect(held[0]![1]).toBe(expected[0]![1]);
    expect([...svg.matchAll(/fill="#cf222e"/g)]).toHaveLength(1);
  });

  it("writes base units as exact dollars", () => {
    expect(usdOfBaseUnits("0")).toBe("$0.00");
    expect(usdOfBaseUnits("10000")).toBe("$0.01");
    expect(usdOfBaseUnits("1")).toBe("$0.000001");
    expect(usdOfBaseUnits("-1230000")).toBe("-$1.23");
    expect(usdOfBaseUnits(123_456_789_000_000n)).toBe("$123,456,789.00");
    expect(usdOfBaseUnits("1005000")).toBe("$1.005");
  });
});

describe("the Treasury page's promises", () => {
  it("shows the outstanding x402 authorizations, counted and summed to the base unit", async () => {
    const { cookie } = await session();
    const page = async () => (await api("GET", "/console/ui/treasury", { headers: { cookie } })).text;
    expect(stat(await page(), "treasury-promised-count")).toBe("0 authorizations");
    const agent = await createAgent({ policy: { allowedX402Hosts: ["*"] }, credit: 10 });
    const paid = await api("POST", "/agent/x402/payments", {
      token: agent.apiKey,
      body: v1Request("12345", { maxTimeoutSeconds: 300 }),
    });
    expect(paid.status, paid.text).toBe(201);
    const html = await page();
    expect(stat(html, "treasury-promised-count")).toBe("1 authorization");
    expect(stat(html, "treasury-promised-total")).toBe(usdOfBaseUnits(12_345n));
    expect(usdOfBaseUnits(12_345n)).toBe("$0.012345");
  });
});
