import { env } from "cloudflare:workers";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { refusalText } from "../../src/console/ui/pages/charge";
import { CONTROL_IDS, newId } from "../../src/lib/ids";
import { api, consoleToken, OPS_EMAIL } from "../helpers/api";
import { balanceOf, createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { paidBelowACent } from "../helpers/sub-cent";
import { waitFor } from "../helpers/wait";

// The console's charge page: a charge, its refunds, and the refund form the operator uses as the charge's merchant.

const FORM = { "content-type": "application/x-www-form-urlencoded" };

/** A signed-in page session: its cookie and the CSRF token its pages carry. */
async function session() {
  const cookie = `console_session=${await consoleToken()}`;
  const overview = await api("GET", "/console/ui", { headers: { cookie } });
  const csrf = /name="_csrf" value="([^"]*)"/.exec(overview.text)?.[1];
  expect(csrf, "a _csrf field in the page").toBeTruthy();
  return { cookie, csrf: csrf! };
}

const page = async (path: string) => api("GET", path, { headers: { cookie: (await session()).cookie } });

/** Submits the refund form of a charge as the browser would (the CSRF token unless `csrf` says otherwise). */
async function refundForm(chargeId: string, fields: Record<string, string>, csrf?: string) {
  const s = await session();
  return api("POST", `/console/ui/charges/${chargeId}/refunds`, {
    body: new URLSearchParams({ _csrf: csrf ?? s.csrf, ...fields }).toString(),
    headers: { ...FORM, cookie: s.cookie },
  });
}

/** The row of one refund in the page, or null. */
const refundRow = (html: string, refundId: string) =>
  new RegExp(`<tr id="refund-${refundId}">([\\s\\S]*?)</tr>`).exec(html)?.[1] ?? null;
/** Every refund id the page lists, in order. */
const listed = (html: string) => [...html.matchAll(/<tr id="refund-(re_[0-9A-Za-z]+)">/g)].map((m) => m[1]!);
const stat = (html: string, id: string) => new RegExp(`id="${id}"[^>]*>([^<]*)<`).exec(html)?.[1];
const errorOf = (html: string) => /<div class="error">([\s\S]*?)<\/div>/.exec(html)?.[1] ?? null;
const noticeOf = (location: string | null) => decodeURIComponent(/notice=(.*)$/.exec(location ?? "")?.[1] ?? "");

/** A merchant with a name of its own, and a charge of `cents` it was paid from an agent's wallet. */
async function paidWalletCharge(cents: number, description = "console refund test") {
  const name = `Charge Page ${crypto.randomUUID().slice(0, 8)}`;
  const merchant = await createMerchant({ name });
  const agent = await createAgent({ credit: cents });
  const charge = await createCharge(merchant.apiKey, cents, { description });
  expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
  expect(await balanceOf(agent.apiKey)).toBe(0);
  return { merchant: { ...merchant, name }, agent, chargeId: charge.chargeId };
}

describe("the charge page", () => {
  it("needs a console session: without one it redirects to sign-in, and a refund without one refunds nothing", async () => {
    const { merchant, chargeId } = await paidWalletCharge(500);
    const res = await api("GET", `/console/ui/charges/${chargeId}`);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/sign-in");
    expect(res.text).not.toContain(chargeId);
    const post = await api("POST", `/console/ui/charges/${chargeId}/refunds`, {
      body: new URLSearchParams({ amount: "1" }).toString(),
      headers: FORM,
    });
    expect(post.status).toBe(303);
    expect(post.headers.get("location")).toBe("/console/sign-in");
    expect(await merchantBalance(merchant.apiKey)).toBe(500);
  });

  it("an unknown charge is a 404 page that says so", async () => {
    const res = await page("/console/ui/charges/chg_doesnotexist");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.text).toContain('id="charge-not-found"');
    expect(res.text).toContain("There is no charge <code>chg_doesnotexist</code>");
    const post = await refundForm("chg_doesnotexist", { amount: "1" });
    expect(post.status).toBe(404);
    expect(post.text).toContain('id="charge-not-found"');
  });

  it("shows a paid wallet charge: merchant, money, status, method, agent, times, and nothing refunded yet", async () => {
    const { merchant, agent, chargeId } = await paidWalletCharge(2_000, "a <b>tagged</b> job");
    const charge = (await api("GET", `/charges/${chargeId}`)).body;
    const res = await page(`/console/ui/charges/${chargeId}`);
    expect(res.status).toBe(200);
    expect(res.text).toContain(`<title>Charge ${chargeId} · agent-pay console</title>`);
    expect(stat(res.text, "charge-amount")).toBe("$20.00");
    expect(stat(res.text, "charge-status")).toBe("paid");
    expect(res.text).toContain('<span id="charge-status" class="badge ok">paid</span>');
    expect(stat(res.text, "charge-refunded")).toBe("$0.00");
    expect(stat(res.text, "charge-remaining")).toBe("$20.00");
    expect(res.text).toContain(merchant.name);
    expect(res.text).toContain(`<code>${merchant.merchantId}</code>`);
    expect(res.text).toContain("a &lt;b&gt;tagged&lt;/b&gt; job");
    expect(res.text).toContain(`<td>ledger</td>`);
    expect(res.text).toContain(`<a href="/console/ui/agents/${agent.agentId}"><code>${agent.agentId}</code></a>`);
    expect(res.text).toContain(`datetime="${charge.createdAt}"`);
    expect(res.text).toContain(`datetime="${charge.paidAt}"`);
    expect(res.text).toContain('<caption class="muted">Refunds of this charge, oldest first</caption>');
    expect(listed(res.text)).toEqual([]);
    expect(res.text).toContain("No refunds.");
    // The form: labelled, empty means everything, with a confirmation naming the merchant.
    expect(res.text).toContain(`action="/console/ui/charges/${chargeId}/refunds"`);
    expect(res.text).toContain('<label for="r-amount">Amount ($, optional)</label>');
    expect(res.text).toContain("Empty refunds everything that remains: $20.00.");
    expect(res.text).toContain(`You refund as the merchant ${merchant.name}`);
    expect(res.text).toContain("back to the paying agent&#39;s wallet");
    expect(res.text).toMatch(/onsubmit="[^"]*return confirm\(/);
  });

  it("a charge below a cent: what remains is shown exactly, and a cent asked of it is refused with that figure", async () => {
    const merchant = await createMerchant({ name: `Sub Cent Page ${crypto.randomUUID().slice(0, 8)}` });
    const chargeId = await paidBelowACent(merchant.merchantId, 1_000n);
    const res = await page(`/console/ui/charges/${chargeId}`);
    expect(res.status).toBe(200);
    expect(stat(res.text, "charge-amount")).toBe("$0.001");
    expect(stat(res.text, "charge-refunded")).toBe("$0.00");
    expect(stat(res.text, "charge-remaining")).toBe("$0.001");
    expect(res.text).toContain("Empty refunds everything that remains: $0.001.");
    const cent = await refundForm(chargeId, { amount: "0.01", seenRefundedMinor: "0" });
    expect(cent.status).toBe(200);
    expect(errorOf(cent.text)).toContain("that is more than what remains to refund of this charge ($0.001)");
  });

  it("lists a refund made through the API, and the refunded and remaining money", async () => {
    const { merchant, agent, chargeId } = await paidWalletCharge(1_500);
    const made = await api("POST", `/merchant/charges/${chargeId}/refunds`, {
      token: merchant.apiKey,
      body: { amountUsdCents: 250 },
    });
    expect(made.status).toBe(201);
    const refund = made.body.refund;
    expect(await balanceOf(agent.apiKey)).toBe(250);

    const res = await page(`/console/ui/charges/${chargeId}`);
    expect(stat(res.text, "charge-refunded")).toBe("$2.50");
    expect(stat(res.text, "charge-remaining")).toBe("$12.50");
    const row = refundRow(res.text, refund.refundId);
    expect(row, "the refund's row").not.toBeNull();
    expect(row).toContain(`<code>${refund.refundId}</code>`);
    expect(row).toContain('<td class="num">$2.50</td>');
    expect(row).toContain('<span class="badge ok">succeeded</span>');
    expect(row).toContain("<td>ledger</td>");
    expect(row).toContain(`datetime="${refund.createdAt}"`);
    expect(res.text).toContain('value="250"'); // the refunded sum the form was shown with
  });

  it("the form refunds part in dollars, then the rest when left empty; the agent gets it back and the form goes", async () => {
    const { merchant, agent, chargeId } = await paidWalletCharge(1_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(1_000);

    const part = await refundForm(chargeId, { amount: "$3.25", seenRefundedMinor: "0" });
    expect(part.status).toBe(303);
    expect(part.headers.get("location")).toMatch(new RegExp(`^/console/ui/charges/${chargeId}\\?notice=`));
    expect(noticeOf(part.headers.get("location"))).toMatch(
      new RegExp(
        `^Refunded \\$3\\.25 to the paying agent's wallet, as the merchant ${merchant.name} \\(re_\\w+\\)\\. \\$6\\.75 remains\\.$`,
      ),
    );
    expect(await balanceOf(agent.apiKey)).toBe(325);
    expect(await merchantBalance(merchant.apiKey)).toBe(675);

    // The same form sent again (it still says nothing was refunded) refunds nothing more.
    const again = await refundForm(chargeId, { amount: "3.25", seenRefundedMinor: "0" });
    expect(again.status).toBe(200);
    expect(errorOf(again.text)).toContain("this charge was refunded since the page was shown");
    expect(await balanceOf(agent.apiKey)).toBe(325);

    const rest = await refundForm(chargeId, { amount: "", seenRefundedMinor: "325" });
    expect(rest.status).toBe(303);
    expect(noticeOf(rest.headers.get("location"))).toContain("Refunded $6.75 to the paying agent's wallet");
    expect(noticeOf(rest.headers.get("location"))).toContain("$0.00 remains.");
    expect(await balanceOf(agent.apiKey)).toBe(1_000);
    expect(await merchantBalance(merchant.apiKey)).toBe(0);

    const res = await page(`/console/ui/charges/${chargeId}`);
    const refunds = (await api("GET", `/merchant/charges/${chargeId}/refunds`, { token: merchant.apiKey })).body
      .refunds;
    expect(refunds.map((r: { amountMinor: number }) => r.amountMinor)).toEqual([325, 675]);
    expect(listed(res.text)).toEqual(refunds.map((r: { refundId: string }) => r.refundId)); // oldest first
    expect(stat(res.text, "charge-refunded")).toBe("$10.00");
    expect(stat(res.text, "charge-remaining")).toBe("$0.00");
    expect(res.text).not.toContain('id="refund-form"');
    expect(res.text).toContain("Refunded in full: nothing remains to refund.");

    // The audit chain names the console user who refunded for the merchant; an API refund names no one.
    const audit = await env.DB.prepare("SELECT data FROM audit_events WHERE type = 'charge.refunded' AND charge_id = ?")
      .bind(chargeId)
      .all<{ data: string }>();
    expect(audit.results.map((r) => JSON.parse(r.data).by)).toEqual([OPS_EMAIL, OPS_EMAIL]);
  });

  it("refusals are in plain words, refund nothing, and keep what was typed", async () => {
    const { merchant, agent, chargeId } = await paidWalletCharge(800);

    const tooMuch = await refundForm(chargeId, { amount: "8.01" });
    expect(tooMuch.status).toBe(200);
    expect(errorOf(tooMuch.text)).toBe(
      "Not refunded: that is more than what remains to refund of this charge ($8.00) (refund_exceeds_remaining).",
    );
    expect(tooMuch.text).toContain('value="8.01"');

    for (const amount of ["0", "1.234", "abc", "-1"]) {
      const bad = await refundForm(chargeId, { amount });
      expect(bad.status, amount).toBe(200);
      expect(errorOf(bad.text), amount).toBe(
        "Not refunded: enter dollars above $0 with at most two decimals, or leave the amount empty.",
      );
    }

    // A charge not paid has no form; a refund sent anyway is refused.
    const unpaid = await createCharge(merchant.apiKey, 400);
    const unpaidPage = await page(`/console/ui/charges/${unpaid.chargeId}`);
    expect(unpaidPage.text).toContain('<span id="charge-status" class="badge warn">pending</span>');
    expect(unpaidPage.text).not.toContain('id="refund-form"');
    expect(unpaidPage.text).toContain("Not paid: there is nothing to refund.");
    const notPaid = await refundForm(unpaid.chargeId, {});
    expect(errorOf(notPaid.text)).toBe(
      "Not refunded: the charge is not paid, so there is nothing to refund (charge_not_paid).",
    );

    // The merchant paid out what the charge brought: its balance is below the refund.
    const address = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } })).status).toBe(
      200,
    );
    const payout = await api("POST", "/merchant/payouts", { token: merchant.apiKey, body: { amountUsdCents: 700 } });
    expect(payout.status).toBe(201);
    await waitFor(
      "the payout decided",
      () =>
        api("GET", `/merchant/payouts/${payout.body.payout.payoutId}`, { token: merchant.apiKey }).then(
          (r) => r.body.payout,
        ),
      (p) => p.status !== "pending",
    );
    expect(await merchantBalance(merchant.apiKey)).toBe(100);
    const broke = await refundForm(chargeId, { amount: "5" });
    expect(errorOf(broke.text)).toContain("the merchant&#39;s balance is below the amount");
    expect(errorOf(broke.text)).toContain("(saldo_insuficiente)");

    expect(await balanceOf(agent.apiKey)).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(100);
    expect(
      (await api("GET", `/merchant/charges/${chargeId}/refunds`, { token: merchant.apiKey })).body.refunds,
    ).toEqual([]);
  });

  it("says every refusal of the refunds service in plain words", () => {
    expect(refusalText("refund_destination_flagged", 0)).toBe(
      "Not refunded: the address that paid failed KYT screening, so nothing is sent to it; the money stays with the merchant (refund_destination_flagged).",
    );
    expect(refusalText("treasury_not_configured", 0)).toContain("on-chain refunds are not set up on this service");
    expect(refusalText("something_new", 0)).toBe("Not refunded: the service refused it (something_new).");
  });

  it("needs the page's CSRF token: without it or with another, nothing is refunded", async () => {
    const { merchant, agent, chargeId } = await paidWalletCharge(600);
    for (const csrf of ["", "0".repeat(64)]) {
      const res = await refundForm(chargeId, { amount: "1" }, csrf);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: "csrf_token_invalid" });
    }
    expect(await balanceOf(agent.apiKey)).toBe(0);
    expect(await merchantBalance(merchant.apiKey)).toBe(600);
  });

  it("an x402 refund shows pending, with the words that say it is being sent, and its transaction once decided", async () => {
    // The page only reads: an x402 charge and its refunds written straight into D1 are all it needs.
    const merchant = await createMerchant({ name: "X402 Page Shop" });
    const chargeId = newId("charge", CONTROL_IDS);
    const at = new Date().toISOString();
    await env.DB.prepare(
      `INSERT INTO charges (id, merchant_id, amount_minor, amount_base_units, currency, status, method, reference, created_at, paid_at, refunded_minor, refunded_base_units)
       VALUES (?, ?, 900, 9000000, 'USD', 'paid', 'x402', ?, ?, ?, 500, 5000000)`,
    )
      .bind(chargeId, merchant.merchantId, `0x${"ab".repeat(32)}`, at, at)
      .run();
    const refund = async (id: string, amount: number, status: string, tx: string | null, createdAt: string) =>
      env.DB.prepare(
        `INSERT INTO refunds (id, charge_id, merchant_id, amount_minor, amount_base_units, currency, method, destination, status, tx_hash, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'USD', 'x402', ?, ?, ?, ?, ?)`,
      )
        .bind(
          id,
          chargeId,
          merchant.merchantId,
          amount,
          amount * 10_000,
          `0x${"cd".repeat(20)}`,
          status,
          tx,
          createdAt,
          createdAt,
        )
        .run();
    const sent = newId("refund", CONTROL_IDS);
    const pending = newId("refund", CONTROL_IDS);
    await refund(sent, 200, "succeeded", `0x${"ef".repeat(32)}`, "2030-01-01T00:00:00.000Z");
    await refund(pending, 300, "pending", null, "2030-01-01T00:00:01.000Z");

    const res = await page(`/console/ui/charges/${chargeId}`);
    expect(res.status).toBe(200);
    expect(listed(res.text)).toEqual([sent, pending]);
    expect(refundRow(res.text, pending)).toContain('<span class="badge warn">pending</span>');
    expect(refundRow(res.text, pending)).toContain("Being sent on chain; reload this page to see its state.");
    expect(refundRow(res.text, sent)).toContain(`<code class="hash" title="0x${"ef".repeat(32)}">`);
    expect(refundRow(res.text, sent)).not.toContain("Being sent on chain");
    expect(res.text).toContain(`<td><code>0x${"ab".repeat(32)}</code></td>`); // the charge's transaction, whole
    expect(stat(res.text, "charge-remaining")).toBe("$4.00");
    expect(res.text).toContain("goes on chain to the address that paid it");
  });
});

describe("links to the charge page", () => {
  it("the agent page's payments and the transactions page name the charge with a link", async () => {
    const { agent, chargeId } = await paidWalletCharge(300);
    const link = `<a href="/console/ui/charges/${chargeId}"><code>${chargeId}</code></a>`;
    expect((await page(`/console/ui/agents/${agent.agentId}`)).text).toContain(link);
    expect((await page("/console/ui/transactions")).text).toContain(link);
  });

  it("the approvals page names a held charge with a link", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ policy: { approvalThresholdUsdCents: 100 }, credit: 500 });
    const charge = await createCharge(merchant.apiKey, 200);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(402);
    expect((await page("/console/ui/approvals")).text).toContain(
      `charge <a href="/console/ui/charges/${charge.chargeId}"><code>${charge.chargeId}</code></a>`,
    );
  });
});
