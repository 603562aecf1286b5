import { getAddress } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { facilitatorTerms, settle, v2Request } from "../helpers/facilitator";
import { createMerchant } from "../helpers/factories";
import { freshPayer } from "../helpers/x402";

// The console's merchant page: a merchant's exact balance, its facilitator payTo, the payments
// settled through the service as its facilitator, and its listed resources.

const BAZAAR = {
  bazaar: {
    info: { input: { type: "http", method: "GET" }, output: { type: "json" } },
    schema: { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object" },
  },
};

const cookie = async () => `console_session=${await consoleToken()}`;
const page = async (path: string) => api("GET", path, { headers: { cookie: await cookie() } });
const merchantPath = (merchantId: string) => `/console/ui/merchants/${merchantId}`;

/** The row of one facilitator payment in the page, or null. */
const paymentRow = (html: string, chargeId: string) =>
  new RegExp(`<tr id="payment-${chargeId}">([\\s\\S]*?)</tr>`).exec(html)?.[1] ?? null;
/** The text of the element with this id. */
const textOf = (html: string, id: string) => new RegExp(`id="${id}"[^>]*>([^<]*)<`).exec(html)?.[1];
/** The rows of the listed resources table. */
const resourceRows = (html: string) => {
  const table = /<table id="listed-resources">([\s\S]*?)<\/table>/.exec(html)?.[1] ?? "";
  return [...table.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((m) => m[1]!).filter((row) => row.includes("<td"));
};

interface FacilitatedCharge {
  chargeId: string;
  amountBaseUnits: string;
  amountMinor: number | null;
  method: string;
  paidAt: string;
  resource?: string;
}

/** A merchant that was paid `value` base units once through the service as its facilitator, for `resource`. */
async function paidThroughFacilitator(name: string, value: bigint, resource: string, listed: boolean) {
  const merchant = await createMerchant({ name });
  const terms = await facilitatorTerms(merchant.apiKey);
  const payer = await freshPayer(1_000_000n);
  const body = await v2Request(payer.key, terms, { value, resource, ...(listed ? { extensions: BAZAAR } : {}) });
  const settled = await settle(merchant.apiKey, body);
  expect(settled.body, settled.text).toMatchObject({ success: true });
  const charges = await api("GET", "/merchant/charges", { token: merchant.apiKey });
  const charge = (charges.body.charges as FacilitatedCharge[]).find((c) => c.resource === resource);
  expect(charge, "the settled payment's charge").toBeDefined();
  return { merchant: { ...merchant, name }, terms, payer, charge: charge!, transaction: settled.body.transaction };
}

describe("the merchant page", () => {
  const id = crypto.randomUUID().slice(0, 8);
  const url = `https://api.tenth.example/quote/${id}`;
  const otherUrl = `https://api.other.example/quote/${id}`;
  let paid: Awaited<ReturnType<typeof paidThroughFacilitator>>;
  let other: Awaited<ReturnType<typeof paidThroughFacilitator>>;
  beforeAll(async () => {
    paid = await paidThroughFacilitator(`Tenth Shop ${id}`, 1000n, url, true);
    other = await paidThroughFacilitator(`Other Shop ${id}`, 2500n, otherUrl, true);
  });

  it("needs a console session: without one it redirects to sign-in and shows nothing of the merchant", async () => {
    const res = await api("GET", merchantPath(paid.merchant.merchantId));
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/sign-in");
    expect(res.text).not.toContain(paid.merchant.name);
    expect(res.text).not.toContain(url);
  });

  it("is linked from the merchants list", async () => {
    const res = await page("/console/ui/merchants");
    expect(res.status).toBe(200);
    expect(res.text).toContain(`<a href="${merchantPath(paid.merchant.merchantId)}">${paid.merchant.name}</a>`);
  });

  it("shows the merchant, its exact balance ($0.001) and its facilitator payTo", async () => {
    const res = await page(merchantPath(paid.merchant.merchantId));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(textOf(res.text, "merchant-name")).toBe(paid.merchant.name);
    expect(textOf(res.text, "merchant-category")).toBe("—");
    expect(textOf(res.text, "merchant-balance")).toBe("$0.001");
    expect(textOf(res.text, "merchant-pay-to")).toBe(getAddress(paid.terms.payTo));
  });

  it("lists a sub-cent facilitator payment exactly, with its resource, payer, transaction and charge", async () => {
    const res = await page(merchantPath(paid.merchant.merchantId));
    expect(paid.charge).toMatchObject({ amountBaseUnits: "1000", amountMinor: null, method: "x402" });
    const row = paymentRow(res.text, paid.charge.chargeId);
    expect(row, "the payment's row").not.toBeNull();
    expect(row).toContain('<td class="num">$0.001</td>');
    expect(row).toContain(`<td class="mono">${url}</td>`);
    expect(row).toContain(`title="${getAddress(paid.payer.address)}"`);
    expect(row).toContain(`title="${paid.transaction}"`);
    expect(row).toContain(`<a href="/console/ui/charges/${paid.charge.chargeId}">`);
    expect(row).toContain(`datetime="${paid.charge.paidAt}"`);
  });

  it("lists its resource with when it was listed and last paid", async () => {
    const listed = await api("GET", "/merchant/x402/resources", { token: paid.merchant.apiKey });
    expect(listed.status).toBe(200);
    const [resource] = listed.body.resources as { resource: string; listedAt: string; lastPaidAt: string }[];
    expect(resource).toMatchObject({ resource: url });
    const res = await page(merchantPath(paid.merchant.merchantId));
    const rows = resourceRows(res.text);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain(`<td class="mono">${url}</td>`);
    expect(rows[0]).toContain("<td>http</td>");
    expect(rows[0]).toContain(`datetime="${resource!.listedAt}"`);
    expect(rows[0]).toContain(`datetime="${resource!.lastPaidAt}"`);
  });

  it("shows none of another merchant's payments or resources", async () => {
    const res = await page(merchantPath(paid.merchant.merchantId));
    expect(res.text).not.toContain(otherUrl);
    expect(res.text).not.toContain(other.charge.chargeId);
    expect(res.text).not.toContain("$0.0025");
    // And the other way round: each merchant's page has its own.
    const theirs = await page(merchantPath(other.merchant.merchantId));
    expect(paymentRow(theirs.text, other.charge.chargeId)).toContain('<td class="num">$0.0025</td>');
    expect(theirs.text).not.toContain(url);
    expect(theirs.text).not.toContain(paid.charge.chargeId);
  });

  it("says so for a merchant with no facilitator payment, listing and payTo, and assigns it none", async () => {
    const plain = await createMerchant({ name: `Plain Shop ${id}`, category: "books" });
    const res = await page(merchantPath(plain.merchantId));
    expect(res.status).toBe(200);
    expect(textOf(res.text, "merchant-category")).toBe("books");
    expect(textOf(res.text, "merchant-balance")).toBe("$0.00");
    expect(res.text).toContain('id="payments-none"');
    expect(res.text).toContain('id="resources-none"');
    expect(textOf(res.text, "merchant-pay-to")).toContain("Not assigned yet");
    // The page only reads: it still has none when the page is shown again.
    expect(textOf((await page(merchantPath(plain.merchantId))).text, "merchant-pay-to")).toContain("Not assigned yet");
  });

  it("an unknown merchant is a 404 page that says so", async () => {
    const res = await page(merchantPath("mch_doesnotexist"));
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.text).toContain('id="merchant-not-found"');
    expect(res.text).toContain("There is no merchant <code>mch_doesnotexist</code>");
  });
});
