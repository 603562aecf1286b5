import { describe, expect, it } from "vitest";
import { signConsoleToken } from "../../src/auth/jwt";
import { api, consoleToken } from "../helpers/api";
import { consoleSecret, expectAuthMatrix, type RouteDescriptor } from "../helpers/auth-matrix";
import { createAgent, createCharge, createMerchant } from "../helpers/factories";

const randomAddress = () =>
  `0x${[...crypto.getRandomValues(new Uint8Array(20))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;

/** Every authenticated route of the app (docs/api.md: Endpoints, Agents, Console merchants, Approvals). */
const ROUTES: RouteDescriptor[] = [
  { method: "POST", path: "/merchants", expects: "console", body: { name: "Matrix Co" } },
  { method: "GET", path: "/console/merchants", expects: "console" },
  { method: "GET", path: "/merchant/me", expects: "merchant" },
  { method: "PUT", path: "/merchant/payout-address", expects: "merchant", body: { address: randomAddress() } },
  { method: "GET", path: "/merchant/charges", expects: "merchant" },
  { method: "POST", path: "/merchant/charges", expects: "merchant", body: { amountUsdCents: 150 } },
  { method: "POST", path: "/charges/chg_doesnotexist/pay", expects: "agent" },
  { method: "POST", path: "/kyt/screen", expects: "console", body: { address: randomAddress(), chain: "ethereum" } },
  { method: "GET", path: "/console/kyt/blocklist", expects: "console" },
  {
    method: "POST",
    path: "/console/kyt/blocklist",
    expects: "console",
    body: { address: randomAddress(), reason: "matrix test" },
  },
  { method: "GET", path: "/export/transactions.csv", expects: "console" },
  { method: "POST", path: "/console/agents", expects: "console", body: { name: "matrix-agent" } },
  { method: "GET", path: "/console/agents", expects: "console" },
  { method: "GET", path: "/console/agents/agent_doesnotexist", expects: "console" },
  {
    method: "PUT",
    path: "/console/agents/agent_doesnotexist/policy",
    expects: "console",
    body: { maxPerTransactionUsdCents: 1000 },
  },
  {
    method: "POST",
    path: "/console/agents/agent_doesnotexist/credits",
    expects: "console",
    body: { amountUsdCents: 100 },
  },
  { method: "POST", path: "/console/agents/agent_doesnotexist/keys", expects: "console", body: { graceSeconds: 0 } },
  { method: "POST", path: "/console/agents/agent_doesnotexist/freeze", expects: "console", body: { reason: "matrix" } },
  { method: "POST", path: "/console/agents/agent_doesnotexist/unfreeze", expects: "console" },
  { method: "POST", path: "/console/merchants/mch_doesnotexist/keys", expects: "console", body: { graceSeconds: 0 } },
  { method: "GET", path: "/console/x402/receiving-addresses", expects: "console" },
  { method: "GET", path: "/balance", expects: "agent" },
  {
    method: "POST",
    path: "/agent/x402/payments",
    expects: "agent",
    body: { resource: "https://api.example/r", paymentRequired: { x402Version: 1, accepts: [] } },
  },
  { method: "GET", path: "/agent/x402/payments", expects: "agent" },
  { method: "GET", path: "/agent/x402/payments/xpo_doesnotexist", expects: "agent" },
  { method: "GET", path: "/console/agents/agent_doesnotexist/x402/payments", expects: "console" },
  { method: "GET", path: "/console/approvals", expects: "console" },
  { method: "POST", path: "/approvals/apr_doesnotexist/grant", expects: "console" },
  { method: "POST", path: "/approvals/apr_doesnotexist/reject", expects: "console" },
  { method: "GET", path: "/console/audit", expects: "console" },
  { method: "GET", path: "/console/audit/verify", expects: "console" },
  { method: "GET", path: "/console/audit/shards", expects: "console" },
  { method: "POST", path: "/merchant/payouts", expects: "merchant", body: { amountUsdCents: 100 } },
  { method: "GET", path: "/merchant/payouts", expects: "merchant" },
  { method: "GET", path: "/merchant/payouts/po_doesnotexist", expects: "merchant" },
  { method: "GET", path: "/merchant/payouts/po_doesnotexist/receipt", expects: "merchant" },
  { method: "GET", path: "/merchant/refunds/re_doesnotexist/receipt", expects: "merchant" },
  { method: "GET", path: "/merchant/charges/ch_doesnotexist/evidence", expects: "merchant" },
  { method: "GET", path: "/console/payouts", expects: "console" },
  { method: "GET", path: "/console/treasury/checks", expects: "console" },
  {
    method: "POST",
    path: "/console/treasury/fundings",
    expects: "console",
    body: { transaction: `0x${randomAddress().slice(2)}${"0".repeat(24)}` },
  },
];

describe("authentication matrix", () => {
  for (const route of ROUTES) {
    it(`${route.method} ${route.path} admits only a valid ${route.expects} credential`, async () => {
      await expectAuthMatrix(route);
    });
  }

  it("a console token for an e-mail not in CONSOLE_USERS is refused with 401", async () => {
    const { token } = await signConsoleToken(consoleSecret(), "mallory@example.com");
    for (const [method, path, body] of [
      ["GET", "/console/merchants", undefined],
      ["POST", "/merchants", { name: "Sneaky" }],
      ["GET", "/console/agents", undefined],
    ] as const) {
      const res = await api(method, path, { token, body });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body.error).toBe("console_session_required");
    }
    // The allowed user (wrangler.toml CONSOLE_USERS), in any letter case, is admitted.
    const allowed = await signConsoleToken(consoleSecret(), "OPS@Example.com");
    const ok = await api("GET", "/console/merchants", { token: allowed.token });
    expect(ok.status).toBe(200);
  });

  it("a merchant key with one character changed is refused with 401", async () => {
    const merchant = await createMerchant();
    const last = merchant.apiKey.at(-1)!;
    const tampered = merchant.apiKey.slice(0, -1) + (last === "A" ? "B" : "A");
    const res = await api("GET", "/merchant/me", { token: tampered });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe("merchant_api_key_required");
    const good = await api("GET", "/merchant/me", { token: merchant.apiKey });
    expect(good.status).toBe(200);
  });
});

describe("public routes and unknown routes", () => {
  it("GET /charges/:chargeId needs no credential", async () => {
    const merchant = await createMerchant();
    const charge = await createCharge(merchant.apiKey, 321, { description: "public read" });
    const res = await api("GET", `/charges/${charge.chargeId}`);
    expect(res.status).toBe(200);
    expect(res.body.chargeId).toBe(charge.chargeId);
    expect(res.body.amountMinor).toBe(321);
    expect(res.body.status).toBe("pending");
    const unknown = await api("GET", "/charges/chg_doesnotexist");
    expect(unknown.status).toBe(404);
    expect(typeof unknown.body.error).toBe("string");
  });

  it("an unknown route answers 404 not_found, with or without a credential", async () => {
    for (const [method, path] of [
      ["GET", "/no/such/route"],
      ["POST", "/merchant/unknown"],
      ["DELETE", "/merchant/me"],
    ] as const) {
      const anonymous = await api(method, path);
      expect(anonymous.status, `${method} ${path}`).toBe(404);
      expect(anonymous.body).toEqual({ error: "not_found" });
    }
    const authed = await api("GET", "/definitely-not-a-route", { token: await consoleToken() });
    expect(authed.status).toBe(404);
    expect(authed.body).toEqual({ error: "not_found" });
  });
});

describe("tenant isolation", () => {
  it("merchant B sees neither merchant A's charges nor A's record", async () => {
    const a = await createMerchant({ name: "Tenant A" });
    const b = await createMerchant({ name: "Tenant B" });
    const chargeA = await createCharge(a.apiKey, 500, { externalId: "a-order" });
    const chargeB = await createCharge(b.apiKey, 700, { externalId: "b-order" });

    const listB = await api("GET", "/merchant/charges", { token: b.apiKey });
    expect(listB.status).toBe(200);
    const idsB = (listB.body.charges as { chargeId: string; merchantId: string }[]).map((c) => c.chargeId);
    expect(idsB).toContain(chargeB.chargeId);
    expect(idsB).not.toContain(chargeA.chargeId);
    for (const charge of listB.body.charges) expect(charge.merchantId).toBe(b.merchantId);

    const listA = await api("GET", "/merchant/charges", { token: a.apiKey });
    const idsA = (listA.body.charges as { chargeId: string }[]).map((c) => c.chargeId);
    expect(idsA).toEqual([chargeA.chargeId]);

    const meB = await api("GET", "/merchant/me", { token: b.apiKey });
    expect(meB.status).toBe(200);
    expect(meB.body.merchant.id).toBe(b.merchantId);
    expect(meB.body.merchant.name).toBe("Tenant B");
    expect(JSON.stringify(meB.body)).not.toContain(a.merchantId);
  });

  it("an agent key cannot read merchant data and a merchant key cannot pay", async () => {
    const merchant = await createMerchant();
    const agent = await createAgent({ credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 100);
    const pay = await api("POST", `/charges/${charge.chargeId}/pay`, { token: merchant.apiKey });
    expect(pay.status).toBe(403);
    const read = await api("GET", "/merchant/charges", { token: agent.apiKey });
    expect(read.status).toBe(403);
    // Nothing moved.
    const pub = await api("GET", `/charges/${charge.chargeId}`);
    expect(pub.body.status).toBe("pending");
  });
});
