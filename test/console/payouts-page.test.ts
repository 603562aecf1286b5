import { env } from "cloudflare:workers";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { CONTROL_IDS, newId } from "../../src/lib/ids";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { waitFor } from "../helpers/wait";

// The console's Payouts page, with payouts made through the API against the local chain.

const page = async (path: string) =>
  api("GET", path, { headers: { cookie: `console_session=${await consoleToken()}` } });

/** The row of one payout in the page, or null when the page does not list it. */
const rowOf = (html: string, payoutId: string) =>
  new RegExp(`<tr id="payout-${payoutId}">([\\s\\S]*?)</tr>`).exec(html)?.[1] ?? null;

/** Every payout id the page lists, in order. */
const listed = (html: string) => [...html.matchAll(/<tr id="payout-(po_[0-9A-Za-z]+)">/g)].map((m) => m[1]!);

/** A merchant (with a name of its own) that earned `cents` from an agent's wallet payment, with a fresh payout address. */
async function fundedMerchant(cents: number) {
  const name = `Payout Page ${crypto.randomUUID().slice(0, 8)}`;
  const merchant = await createMerchant({ name });
  const agent = await createAgent({ credit: cents });
  const charge = await createCharge(merchant.apiKey, cents);
  expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
  const address = privateKeyToAccount(generatePrivateKey()).address;
  expect((await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } })).status).toBe(
    200,
  );
  return { ...merchant, name, address };
}

/** A payout made through the API, once its transfer is decided. */
async function paidOut(m: { apiKey: string }, cents: number) {
  const made = await api("POST", "/merchant/payouts", { token: m.apiKey, body: { amountUsdCents: cents } });
  expect(made.status).toBe(201);
  return waitFor(
    `payout ${made.body.payout.payoutId}`,
    () => api("GET", `/merchant/payouts/${made.body.payout.payoutId}`, { token: m.apiKey }).then((r) => r.body.payout),
    (p) => p.status !== "pending",
  );
}

/** A failed payout written straight into D1: the page only reads, so a row is all it needs. */
async function failedRow(merchantId: string, reason: string, createdAt = new Date().toISOString()) {
  const id = newId("payout", CONTROL_IDS);
  await env.DB.prepare(
    `INSERT INTO payouts (id, merchant_id, amount_minor, currency, destination, status, failure_reason, created_at, updated_at)
     VALUES (?, ?, 4321, 'USD', ?, 'failed', ?, ?, ?)`,
  )
    .bind(id, merchantId, privateKeyToAccount(generatePrivateKey()).address.toLowerCase(), reason, createdAt, createdAt)
    .run();
  return id;
}

describe("the Payouts page", () => {
  it("needs a console session: without one it redirects to sign-in and shows nothing", async () => {
    const res = await api("GET", "/console/ui/payouts");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/sign-in");
    expect(res.text).not.toContain("<table");
    const visitor = await api("GET", "/console/ui/payouts", {
      headers: { cookie: `console_session=${await consoleToken("visitor@example.com")}` },
    });
    expect(visitor.status).toBe(303);
    expect(visitor.headers.get("location")).toBe("/console/sign-in");
  });

  it("lists a payout made through the API: merchant, dollars, destination, paid with its transaction, and its times", async () => {
    const m = await fundedMerchant(1_500);
    const payout = await paidOut(m, 1_234);
    expect(payout.status).toBe("paid");
    expect(await merchantBalance(m.apiKey)).toBe(266);

    const res = await page("/console/ui/payouts");
    expect(res.status).toBe(200);
    expect(res.text).toContain('<a href="/console/ui/payouts" class="on">Payouts</a>');
    const row = rowOf(res.text, payout.payoutId);
    expect(row, "the payout's row").not.toBeNull();
    expect(row).toContain(`<code>${payout.payoutId}</code>`);
    expect(row).toContain(m.name);
    expect(row).toContain(`<code>${m.merchantId}</code>`);
    expect(row).toContain('<td class="num">$12.34</td>');
    expect(row).not.toContain(">1234<");
    expect(row).toContain(`<td class="mono">${m.address.toLowerCase()}</td>`);
    expect(row).toContain('<span class="badge ok">paid</span>');
    expect(payout.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(row).toContain(`<code class="hash" title="${payout.transaction}">${payout.transaction}</code>`);
    expect(row).toContain(`datetime="${payout.createdAt}"`);
    expect(row).toContain(`datetime="${payout.paidAt}"`);
  });

  it("filters by status; a failed payout shows its reason (escaped), and the totals are by status", async () => {
    const m = await fundedMerchant(800);
    const paid = await paidOut(m, 800);
    expect(paid.status).toBe("paid");
    const failed = await failedRow(m.merchantId, "treasury_insufficient_funds <b>not markup</b>");

    const onlyPaid = await page("/console/ui/payouts?status=paid");
    expect(onlyPaid.status).toBe(200);
    expect(listed(onlyPaid.text)).toContain(paid.payoutId);
    expect(listed(onlyPaid.text)).not.toContain(failed);
    expect(
      onlyPaid.text.match(/<span class="badge (ok|warn|bad)">(\w+)<\/span>/g)?.every((b) => b.includes(">paid<")),
    ).toBe(true);
    expect(onlyPaid.text).toContain(
      '<a href="/console/ui/payouts?status=paid" class="on" aria-current="page">paid</a>',
    );

    const onlyFailed = await page("/console/ui/payouts?status=failed");
    expect(listed(onlyFailed.text)).toContain(failed);
    expect(listed(onlyFailed.text)).not.toContain(paid.payoutId);
    const row = rowOf(onlyFailed.text, failed)!;
    expect(row).toContain('<span class="badge bad">failed</span>');
    expect(row).toContain("treasury_insufficient_funds &lt;b&gt;not markup&lt;/b&gt;");
    expect(row).toContain('<td class="num">$43.21</td>');
    expect(row).not.toContain('class="hash"');

    const pending = await page("/console/ui/payouts?status=pending");
    expect(listed(pending.text)).not.toContain(failed);
    expect(listed(pending.text)).not.toContain(paid.payoutId);

    // Not a status: all of them, as without a filter.
    const all = listed((await page("/console/ui/payouts?status=lost")).text);
    expect(all).toEqual(expect.arrayContaining([failed, paid.payoutId]));
    expect(all.indexOf(failed)).toBeLessThan(all.indexOf(paid.payoutId)); // newest first

    // The totals are those of the payouts table (this file's database: no other test writes to it), a status without any at zero.
    const html = (await page("/console/ui/payouts")).text;
    const totals = new Map(
      (
        await env.DB.prepare(
          "SELECT status, COUNT(*) AS n, SUM(amount_minor) AS cents FROM payouts GROUP BY status",
        ).all<{
          status: string;
          n: number;
          cents: number;
        }>()
      ).results.map((t) => [t.status, t]),
    );
    expect(totals.get("failed")?.n).toBe(1);
    expect(totals.get("paid")?.n).toBeGreaterThanOrEqual(1);
    for (const status of ["pending", "paid", "failed"]) {
      const { n, cents } = totals.get(status) ?? { n: 0, cents: 0 };
      const stat = new RegExp(`<div class="stat" id="payout-total-${status}">([\\s\\S]*?)</div>`).exec(html)?.[1];
      const dollars = (cents / 100).toLocaleString("en-US", { minimumFractionDigits: 2 });
      expect(stat, status).toContain(`<b>$${dollars}</b>`);
      expect(stat, status).toContain(`${n} payout${n === 1 ? "" : "s"}`);
    }
  });

  it("shows the 100 newest and says so when there are more; an empty filter says there are none", async () => {
    const m = await createMerchant({ name: "Many Payouts" });
    const ids: string[] = [];
    for (let i = 0; i < 101; i++)
      ids.push(await failedRow(m.merchantId, "many", new Date(Date.UTC(2001, 0, 1, 0, 0, i)).toISOString()));
    const res = await page("/console/ui/payouts?status=failed");
    const shown = listed(res.text);
    expect(shown).toHaveLength(100);
    expect(shown).not.toContain(ids[0]); // the oldest
    expect(res.text).toContain('id="payouts-limit"');
    expect(res.text).toContain("The 100 newest are shown; there are more.");

    const pending = await page("/console/ui/payouts?status=pending");
    expect(listed(pending.text)).toEqual([]);
    expect(pending.text).toContain("No pending payouts.");
    expect(pending.text).not.toContain('id="payouts-limit"');
  });
});
