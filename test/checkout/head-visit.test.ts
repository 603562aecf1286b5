import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, BASE } from "../helpers/api";
import { createMerchant } from "../helpers/factories";

const head = async (path: string) => {
  const res = await exports.default.fetch(new Request(`${BASE}${path}`, { method: "HEAD" }));
  return { status: res.status, headers: res.headers, text: await res.text() };
};

describe("HEAD /checkout/:token", () => {
  it("answers as GET does, without a body, and is not counted as a visit (regression)", async () => {
    const merchant = await createMerchant({ name: "Head Shop" });
    const link = (
      await api("POST", "/merchant/checkout", {
        token: merchant.apiKey,
        body: { amountUsdCents: 700, description: "one report" },
      })
    ).body;

    const first = await head(`/checkout/${link.checkoutToken}`);
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toMatch(/^application\/json/);
    expect(first.text).toBe("");
    expect((await head(`/checkout/${link.checkoutToken}`)).status).toBe(200);

    const view = await api("GET", `/checkout/${link.checkoutToken}`);
    expect(view.status).toBe(200);
    expect(view.body.merchantName).toBe("Head Shop");
    expect(view.body.visits).toBe(1);
    const listed = (await api("GET", "/merchant/checkout-links", { token: merchant.apiKey })).body.links;
    expect(listed.map((l: { visits: number }) => l.visits)).toEqual([1]);

    const unknown = await head("/checkout/ct_unknown");
    expect(unknown.status).toBe(404);
    expect(unknown.text).toBe("");
  });
});
