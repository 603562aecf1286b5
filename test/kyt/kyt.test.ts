import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";

// From data/ofac-sdn-eth.txt, as listed there (mixed-case checksum form).
const OFAC_ADDRESS = "0x098B716B8Aaf21512996dC57EB0615e2383E2f96";
const OFAC_ADDRESS_2 = "0x722122dF12D4e14e13Ac3b6895a86e84145b6967";

const randomAddress = () =>
  `0x${[...crypto.getRandomValues(new Uint8Array(20))].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
const upperHex = (address: string) => `0x${address.slice(2).toUpperCase()}`;

const screen = async (body: unknown) => api("POST", "/kyt/screen", { token: await consoleToken(), body });

describe("POST /kyt/screen", () => {
  it("passes a clean address", async () => {
    const res = await screen({ address: randomAddress(), chain: "ethereum" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ verdict: "pass", reason: "no_blocklist_hit" });
  });

  it.each([
    ["as listed", OFAC_ADDRESS],
    ["lower case", OFAC_ADDRESS.toLowerCase()],
    ["upper case", upperHex(OFAC_ADDRESS)],
    ["another entry, upper case", upperHex(OFAC_ADDRESS_2)],
  ])("blocks an OFAC SDN address (%s) with a reason naming the list", async (_label, address) => {
    const res = await screen({ address, chain: "ethereum" });
    expect(res.status).toBe(200);
    expect(typeof res.body.verdict).toBe("string");
    expect(res.body.verdict).not.toBe("pass");
    expect(typeof res.body.reason).toBe("string");
    expect(res.body.reason).not.toBe("no_blocklist_hit");
    expect(res.body.reason.toLowerCase()).toMatch(/ofac|sdn/);
  });

  it("blocks an address an operator added, in any letter case", async () => {
    const token = await consoleToken();
    const address = randomAddress();
    expect((await screen({ address, chain: "ethereum" })).body.verdict).toBe("pass");

    const added = await api("POST", "/console/kyt/blocklist", {
      token,
      body: { address: upperHex(address), reason: "chargeback ring" },
    });
    expect(added.status).toBe(201);

    for (const variant of [address, upperHex(address)]) {
      const res = await screen({ address: variant, chain: "base" });
      expect(res.status).toBe(200);
      expect(res.body.verdict).not.toBe("pass");
      expect(typeof res.body.verdict).toBe("string");
      expect(res.body.reason).not.toBe("no_blocklist_hit");
    }

    const list = await api("GET", "/console/kyt/blocklist", { token });
    expect(list.status).toBe(200);
    const entries = list.body.entries as { address: string }[];
    expect(entries.some((e) => e.address.toLowerCase() === address.toLowerCase())).toBe(true);
  });

  it("the verdict of a clean address is unaffected by another address being listed", async () => {
    const listed = randomAddress();
    const other = randomAddress();
    await api("POST", "/console/kyt/blocklist", { token: await consoleToken(), body: { address: listed } });
    const res = await screen({ address: other, chain: "ethereum" });
    expect(res.body).toEqual({ verdict: "pass", reason: "no_blocklist_hit" });
  });

  it.each([
    ["too short", { address: "0x123", chain: "ethereum" }],
    ["non-hex digits", { address: `0x${"z".repeat(40)}`, chain: "ethereum" }],
    ["no 0x prefix", { address: "b".repeat(40), chain: "ethereum" }],
    ["missing address", { chain: "ethereum" }],
    ["missing chain", { address: `0x${"a".repeat(40)}` }],
    ["empty chain", { address: `0x${"a".repeat(40)}`, chain: "" }],
    ["chain not a string", { address: `0x${"a".repeat(40)}`, chain: 1 }],
  ])("400 invalid_request for %s", async (_label, body) => {
    const res = await screen(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
    expect(Array.isArray(res.body.issues)).toBe(true);
    expect(res.body.issues.length).toBeGreaterThan(0);
  });

  it("the operator blocklist rejects an invalid address", async () => {
    const res = await api("POST", "/console/kyt/blocklist", {
      token: await consoleToken(),
      body: { address: "0x123" },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });
});
