import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { createMerchant } from "../helpers/factories";

// From data/ofac-sdn-eth.txt, as listed there (mixed-case checksum form).
const OFAC_ADDRESS = "0x098B716B8Aaf21512996dC57EB0615e2383E2f96";
const OFAC_ADDRESS_2 = "0x722122dF12D4e14e13Ac3b6895a86e84145b6967";

const randomAddress = () =>
  `0x${[...crypto.getRandomValues(new Uint8Array(20))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
const upperHex = (address: string) => `0x${address.slice(2).toUpperCase()}`;

async function sha256Hex(text: string) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const me = async (key: string) => {
  const res = await api("GET", "/merchant/me", { token: key });
  expect(res.status).toBe(200);
  return res.body.merchant as {
    id: string;
    name: string;
    balanceMinor: number;
    currency: string;
    payoutAddress: string | null;
  };
};

const putPayout = (key: string, body: unknown) => api("PUT", "/merchant/payout-address", { token: key, body });

describe("POST /merchants", () => {
  it("registers a merchant: 201 with merchantId and a one-time API key", async () => {
    const res = await api("POST", "/merchants", { token: await consoleToken(), body: { name: "Acme Data" } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["apiKey", "merchantId"]);
    expect(res.body.merchantId).toMatch(/^mch_[A-Za-z0-9]+$/);
    expect(res.body.apiKey).toMatch(/^sk_mch_[A-Za-z0-9_-]{43}$/);
    // The key works and identifies this merchant.
    const merchant = await me(res.body.apiKey);
    expect(merchant.id).toBe(res.body.merchantId);
    expect(merchant.name).toBe("Acme Data");
  });

  it("issues a distinct id and key to each merchant", async () => {
    const a = await createMerchant();
    const b = await createMerchant();
    expect(a.merchantId).not.toBe(b.merchantId);
    expect(a.apiKey).not.toBe(b.apiKey);
  });

  it("takes an optional category, shown in the console list", async () => {
    const token = await consoleToken();
    const withCategory = await api("POST", "/merchants", { token, body: { name: "Data Shop", category: "data" } });
    expect(withCategory.status).toBe(201);
    const without = await api("POST", "/merchants", { token, body: { name: "Plain Shop" } });
    expect(without.status).toBe(201);
    const list = await api("GET", "/console/merchants", { token });
    expect(list.status).toBe(200);
    const byId = new Map((list.body.merchants as { id: string; category: string | null }[]).map((m) => [m.id, m]));
    expect(byId.get(withCategory.body.merchantId)?.category).toBe("data");
    expect(byId.get(without.body.merchantId)?.category).toBeNull();
  });

  it.each([
    ["missing name", {}],
    ["empty name", { name: "" }],
    ["blank name", { name: "   " }],
    ["name not a string", { name: 42 }],
    ["unknown field", { name: "Acme", apiKey: "sk_mch_chosen_by_caller" }],
    ["unknown field balance", { name: "Acme", balanceMinor: 100000 }],
    ["empty category", { name: "Acme", category: "" }],
  ])("400 invalid_request with issues for %s", async (_label, body) => {
    const res = await api("POST", "/merchants", { token: await consoleToken(), body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    expect(Array.isArray(res.body.issues)).toBe(true);
    expect(res.body.issues.length).toBeGreaterThan(0);
  });

  it("400 invalid_request for a body that is not JSON", async () => {
    for (const body of ["{not json", "name=Acme", ""]) {
      const res = await api("POST", "/merchants", {
        token: await consoleToken(),
        body,
        headers: { "content-type": "application/json" },
      });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toBe("invalid_request");
      expect(Array.isArray(res.body.issues)).toBe(true);
    }
    const array = await api("POST", "/merchants", { token: await consoleToken(), body: [{ name: "Acme" }] });
    expect(array.status).toBe(400);
    expect(array.body.error).toBe("invalid_request");
  });

  it("stores the API key only as its SHA-256 hash", async () => {
    const { merchantId, apiKey } = await createMerchant({ name: "Hash Check" });
    const row = await env.DB.prepare("SELECT * FROM merchants WHERE id = ?")
      .bind(merchantId)
      .first<Record<string, unknown>>();
    expect(row).not.toBeNull();
    expect(row!.api_key_hash).toBe(await sha256Hex(apiKey));

    // No cell of any table holds the key or its secret part.
    const secretPart = apiKey.slice("sk_mch_".length);
    const tables = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'",
    ).all<{ name: string }>();
    expect(tables.results.map((t) => t.name)).toContain("merchants");
    for (const { name } of tables.results) {
      const rows = await env.DB.prepare(`SELECT * FROM "${name}"`).all();
      const dump = JSON.stringify(rows.results);
      expect(dump.includes(apiKey), `table ${name} holds the plaintext key`).toBe(false);
      expect(dump.includes(secretPart), `table ${name} holds the key's secret part`).toBe(false);
    }
  });
});

describe("GET /merchant/me", () => {
  it("returns exactly the spec's merchant object", async () => {
    const { merchantId, apiKey } = await createMerchant({ name: "Shape Check", category: "compute" });
    const res = await api("GET", "/merchant/me", { token: apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      merchant: {
        id: merchantId,
        name: "Shape Check",
        balanceMinor: 0,
        balanceBaseUnits: "0",
        currency: "USD",
        payoutAddress: null,
      },
    });
  });
});

describe("GET /console/merchants", () => {
  it("lists merchants with id, name, category, balanceMinor, payoutAddress and createdAt", async () => {
    const before = Date.now();
    const { merchantId, apiKey } = await createMerchant({ name: "Listed Co", category: "data" });
    const address = randomAddress();
    expect((await putPayout(apiKey, { address })).status).toBe(200);

    const res = await api("GET", "/console/merchants", { token: await consoleToken() });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body.merchants)).toBe(true);
    const entry = res.body.merchants.find((m: { id: string }) => m.id === merchantId);
    expect(entry).toMatchObject({
      id: merchantId,
      name: "Listed Co",
      category: "data",
      balanceMinor: 0,
      balanceBaseUnits: "0",
      payoutAddress: address,
    });
    expect(typeof entry.createdAt).toBe("string");
    expect(entry.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(Date.parse(entry.createdAt)).toBeGreaterThanOrEqual(before - 1000);
    // Never a key or its hash.
    for (const m of res.body.merchants) {
      expect(m).not.toHaveProperty("apiKey");
      expect(m).not.toHaveProperty("apiKeyHash");
    }
    expect(res.text).not.toContain(apiKey);
    expect(res.text).not.toContain(await sha256Hex(apiKey));
  });
});

describe("PUT /merchant/payout-address", () => {
  it("sets a clean address: 200 with a passing KYT result, visible in /merchant/me", async () => {
    const { apiKey } = await createMerchant();
    const address = randomAddress();
    const res = await putPayout(apiKey, { address });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, kyt: { verdict: "pass", reason: "no_blocklist_hit" } });
    expect((await me(apiKey)).payoutAddress).toBe(address);

    // It can be replaced by another clean address.
    const next = upperHex(randomAddress());
    expect((await putPayout(apiKey, { address: next })).status).toBe(200);
    expect((await me(apiKey)).payoutAddress).toBe(next);
  });

  it.each([
    ["too short", { address: "0x123" }],
    ["missing address", {}],
    ["non-hex digits", { address: `0x${"g".repeat(40)}` }],
    ["no 0x prefix", { address: "a".repeat(40) }],
    ["41 hex digits", { address: `0x${"a".repeat(41)}` }],
    ["not a string", { address: 12345 }],
    ["unknown field", { address: `0x${"a".repeat(40)}`, chain: "ethereum" }],
    ["a wrong EIP-55 checksum", { address: "0xd8f42Fd325145Bd1e7130705bD6A72c3644Bc49D" }],
    ["the zero address", { address: `0x${"0".repeat(40)}` }],
    ["the service's settlement address", { address: inject("chain").payTo }],
    ["the token contract", { address: inject("chain").token.toLowerCase() }],
  ])("400 for %s, and nothing is stored", async (_label, body) => {
    const { apiKey } = await createMerchant();
    const res = await putPayout(apiKey, body);
    expect(res.status).toBe(400);
    expect(typeof res.body.error).toBe("string");
    expect((await me(apiKey)).payoutAddress).toBeNull();
  });

  it.each([
    ["as listed", OFAC_ADDRESS],
    ["lower case", OFAC_ADDRESS.toLowerCase()],
    ["upper case", upperHex(OFAC_ADDRESS)],
    ["another entry, lower case", OFAC_ADDRESS_2.toLowerCase()],
  ])("403 with a blocking verdict for an OFAC SDN address (%s), not stored", async (_label, address) => {
    const { apiKey } = await createMerchant();
    const res = await putPayout(apiKey, { address });
    expect(res.status).toBe(403);
    expect(typeof res.body.error).toBe("string");
    expect(typeof res.body.verdict).toBe("string");
    expect(res.body.verdict).not.toBe("pass");
    expect(res.body.ok).toBeUndefined();
    expect((await me(apiKey)).payoutAddress).toBeNull();
  });

  it("a flagged address does not replace the stored clean one", async () => {
    const { apiKey } = await createMerchant();
    const clean = randomAddress();
    expect((await putPayout(apiKey, { address: clean })).status).toBe(200);
    const res = await putPayout(apiKey, { address: OFAC_ADDRESS });
    expect(res.status).toBe(403);
    expect((await me(apiKey)).payoutAddress).toBe(clean);
  });

  it("403 for an address an operator added to the blocklist", async () => {
    const { apiKey } = await createMerchant();
    const address = randomAddress();
    // Clean before it is listed.
    const screen = await api("POST", "/kyt/screen", {
      token: await consoleToken(),
      body: { address, chain: "ethereum" },
    });
    expect(screen.body.verdict).toBe("pass");

    const added = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: upperHex(address), reason: "fraud report" },
    });
    expect(added.status).toBe(201);

    const res = await putPayout(apiKey, { address });
    expect(res.status).toBe(403);
    expect(res.body.verdict).not.toBe("pass");
    expect(typeof res.body.verdict).toBe("string");
    expect((await me(apiKey)).payoutAddress).toBeNull();
  });
});
