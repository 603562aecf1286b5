import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  declaresUtf8,
  findJsonTextIssue,
  hasByteOrderMark,
  isWellFormed,
  readStrictJson,
} from "../../src/lib/strict-json";
import { api, BASE, consoleToken } from "../helpers/api";
import { createAgent, createMerchant } from "../helpers/factories";

/*
 * A JSON body is read as sent (lib/strict-json.ts). Found by an outside probe:
 * `{"description":"\ud800"}` was accepted, echoed in the 201 and read back as
 * U+FFFD; `{"amountUsdCents":-5,"amountUsdCents":7}` made a 7-cent charge (the
 * last key won); a body declared `charset=utf-16`, or starting with a
 * byte-order mark, was read as UTF-8. Now: another charset or a BOM is 415,
 * the rest is 400 `invalid_request` and nothing is created.
 */

const utf8 = (text: string) => new TextEncoder().encode(text);
const bytesOf = (...parts: (Uint8Array | number[])[]) => new Uint8Array(parts.flatMap((p) => [...p]));

/** A request with exactly these bytes and Content-Type (a string body would be re-encoded, and `api` would add a type). */
async function send(
  method: string,
  path: string,
  token: string,
  body: string | Uint8Array,
  contentType = "application/json",
  headers: Record<string, string> = {},
) {
  const bytes = typeof body === "string" ? utf8(body) : body;
  const request = new Request(`${BASE}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": contentType, ...headers },
    body: bytes,
  });
  const response = await exports.default.fetch(request);
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text, spellLoneSurrogates), text, shown: JSON.stringify(text) };
}

/*
 * A lone surrogate in a failing assertion's output breaks the pool's WebSocket
 * (invalid UTF-8) and ends the whole run: so `shown` for messages, and a body
 * whose strings spell any lone surrogate out as text (`\ud800`).
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const spellLoneSurrogates = (_key: string, value: unknown) =>
  typeof value === "string" ? value.replace(LONE_SURROGATE, (ch) => `\\u${ch.charCodeAt(0).toString(16)}`) : value;

const chargeCount = async (merchantKey: string) =>
  ((await api("GET", "/merchant/charges", { token: merchantKey })).body.charges as unknown[]).length;
const postCharge = (
  merchantKey: string,
  body: string | Uint8Array,
  contentType?: string,
  headers?: Record<string, string>,
) => send("POST", "/merchant/charges", merchantKey, body, contentType, headers);

const issue = (code: string, path: string) => ({
  error: "invalid_request",
  issues: [{ path, code, message: expect.any(String) }],
});

describe("lone surrogates: 400, nothing created", () => {
  it("in a charge description (the probe's body): 400, the value not echoed, no charge", async () => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, '{"amountUsdCents":100,"description":"\\ud800"}');
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("ill_formed_unicode", "description"));
    expect(res.text.toLowerCase()).not.toContain("ud800");
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it.each([
    ["a low surrogate alone", '"x\\udc00y"'],
    ["a high surrogate then a letter", '"\\ud83dA"'],
    ["two high surrogates", '"\\ud83d\\ud83d"'],
    ["a reversed pair", '"\\ude00\\ud83d"'],
  ])("%s: 400", async (_label, description) => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, `{"amountUsdCents":100,"description":${description}}`);
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("ill_formed_unicode", "description"));
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it("in a key: 400 at the object's path, the key not echoed", async () => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, '{"amountUsdCents":100,"\\udfff":1}');
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("ill_formed_unicode", ""));
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it("in a nested key or an array item: 400 with its path (agent policy)", async () => {
    const token = await consoleToken();
    const name = `strict-json-${crypto.randomUUID()}`;
    const nestedKey = await send("POST", "/console/agents", token, `{"name":"${name}","policy":{"\\ud800x":1}}`);
    expect(nestedKey.status, nestedKey.shown).toBe(400);
    expect(nestedKey.body).toEqual(issue("ill_formed_unicode", "policy"));
    const inArray = await send(
      "POST",
      "/console/agents",
      token,
      `{"name":"${name}","policy":{"allowedCategories":["data","\\udbff"]}}`,
    );
    expect(inArray.status, inArray.shown).toBe(400);
    expect(inArray.body).toEqual(issue("ill_formed_unicode", "policy.allowedCategories.1"));
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM agents WHERE name = ?").bind(name).first("n")).toBe(0);
  });

  it.each([
    ["as UTF-8 bytes", '"report 😀 ok"'],
    ["as escapes", '"report \\ud83d\\ude00 ok"'],
    ["as upper-case escapes", '"report \\uD83D\\uDE00 ok"'],
  ])("a well-formed pair (an emoji) %s is accepted and stored exactly", async (_label, description) => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, `{"amountUsdCents":100,"description":${description}}`);
    expect(res.status, res.shown).toBe(201);
    expect(res.body.description).toBe("report 😀 ok");
    const read = await api("GET", `/charges/${res.body.chargeId}`);
    expect(read.body.description).toBe("report 😀 ok");
  });
});

describe("duplicate keys: 400, nothing created", () => {
  it("top level (the probe's body: the last key used to win, a 7-cent charge)", async () => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, '{"amountUsdCents":-5,"amountUsdCents":7}');
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("duplicate_key", "amountUsdCents"));
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it("the same key spelled with an escape is the same key", async () => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, '{"amountUsdCents":100,"\\u0061mountUsdCents":7}');
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("duplicate_key", "amountUsdCents"));
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it("in the agent policy: 400 and the policy unchanged", async () => {
    const policy = {
      maxPerTransactionUsdCents: 777,
      dailyLimitUsdCents: 5000,
      allowedCategories: ["data"],
      approvalThresholdUsdCents: 300,
      allowedX402Hosts: ["api.example"],
    };
    const agent = await createAgent({ policy });
    const token = await consoleToken();
    const res = await send(
      "PUT",
      `/console/agents/${agent.agentId}/policy`,
      token,
      '{"dailyLimitUsdCents":5000,"allowedCategories":["data"],"dailyLimitUsdCents":null}',
    );
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("duplicate_key", "dailyLimitUsdCents"));
    expect((await api("GET", `/console/agents/${agent.agentId}`, { token })).body.policy).toEqual(policy);
  });

  it("nested: the policy inside a new agent, 400 with its path and no agent", async () => {
    const token = await consoleToken();
    const name = `strict-json-${crypto.randomUUID()}`;
    const res = await send(
      "POST",
      "/console/agents",
      token,
      `{"name":"${name}","policy":{"dailyLimitUsdCents":100,"dailyLimitUsdCents":null}}`,
    );
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("duplicate_key", "policy.dailyLimitUsdCents"));
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM agents WHERE name = ?").bind(name).first("n")).toBe(0);
  });
});

describe("encodings: UTF-8 only, no byte-order mark", () => {
  it.each([
    "application/json; charset=utf-16",
    "application/json;charset=UTF-16LE",
    'application/json; charset="iso-8859-1"',
    "application/json; charset=utf-32",
  ])("%s: 415 unsupported_media_type, no charge", async (contentType) => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, '{"amountUsdCents":100}', contentType);
    expect(res.status, res.shown).toBe(415);
    expect(res.body).toEqual({ error: "unsupported_media_type" });
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it.each(["application/json; charset=UTF-8", "application/json; charset=utf8", 'application/json; charset="utf-8"'])(
    "%s is accepted",
    async (contentType) => {
      const merchant = await createMerchant();
      const res = await postCharge(merchant.apiKey, '{"amountUsdCents":100}', contentType);
      expect(res.status, res.shown).toBe(201);
    },
  );

  it.each([
    ["UTF-8", [0xef, 0xbb, 0xbf], utf8('{"amountUsdCents":100}')],
    ["UTF-16 BE", [0xfe, 0xff], bytesOf(...[...'{"amountUsdCents":100}'].map((ch) => [0, ch.charCodeAt(0)]))],
    ["UTF-16 LE", [0xff, 0xfe], bytesOf(...[...'{"amountUsdCents":100}'].map((ch) => [ch.charCodeAt(0), 0]))],
  ])("a %s byte-order mark: 415, no charge", async (_label, bom, body) => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, bytesOf(bom, body));
    expect(res.status, res.shown).toBe(415);
    expect(res.body).toEqual({ error: "unsupported_media_type" });
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it.each([
    ["a lone continuation byte", [0x80]],
    ["an overlong encoding", [0xc0, 0xa2]],
    ["a surrogate encoded as UTF-8 (CESU)", [0xed, 0xa0, 0x80]],
    ["a truncated sequence", [0xe2, 0x82]],
  ])("invalid UTF-8 in a string (%s): 400 invalid_utf8, no charge", async (_label, bad) => {
    const merchant = await createMerchant();
    const res = await postCharge(
      merchant.apiKey,
      bytesOf(utf8('{"amountUsdCents":100,"description":"a'), bad, utf8('b"}')),
    );
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("invalid_utf8", ""));
    expect(await chargeCount(merchant.apiKey)).toBe(0);
  });

  it("with an Idempotency-Key (its hash reads the body first): a BOM is still 415 and bad UTF-8 still 400", async () => {
    const merchant = await createMerchant();
    const withBom = await postCharge(
      merchant.apiKey,
      bytesOf([0xef, 0xbb, 0xbf], utf8('{"amountUsdCents":100}')),
      undefined,
      { "idempotency-key": crypto.randomUUID() },
    );
    expect(withBom.status, withBom.shown).toBe(415);
    const badBytes = await postCharge(
      merchant.apiKey,
      bytesOf(utf8('{"amountUsdCents":100,"description":"'), [0xff], utf8('"}')),
      undefined,
      { "idempotency-key": crypto.randomUUID() },
    );
    expect(badBytes.status, badBytes.shown).toBe(400);
    expect(badBytes.body).toEqual(issue("invalid_utf8", ""));
    const duplicate = await postCharge(merchant.apiKey, '{"amountUsdCents":-5,"amountUsdCents":7}', undefined, {
      "idempotency-key": crypto.randomUUID(),
    });
    expect(duplicate.status, duplicate.shown).toBe(400);
    expect(await chargeCount(merchant.apiKey)).toBe(0);
    // And a good body with a key still works (the hash reads the same bytes the validator parses).
    const good = await postCharge(merchant.apiKey, '{"amountUsdCents":100,"description":"😀"}', undefined, {
      "idempotency-key": crypto.randomUUID(),
    });
    expect(good.status, good.shown).toBe(201);
    expect(good.body.description).toBe("😀");
  });

  it("a 415 is not kept under its Idempotency-Key: the same bytes with the charset fixed run, not a replayed 415", async () => {
    const merchant = await createMerchant();
    const key = crypto.randomUUID();
    const refused = await postCharge(merchant.apiKey, '{"amountUsdCents":100}', "application/json; charset=utf-16", {
      "idempotency-key": key,
    });
    expect(refused.status, refused.shown).toBe(415);
    const fixed = await postCharge(merchant.apiKey, '{"amountUsdCents":100}', "application/json; charset=utf-8", {
      "idempotency-key": key,
    });
    expect(fixed.status, fixed.shown).toBe(201);
    expect(await chargeCount(merchant.apiKey)).toBe(1);
  });

  it("malformed JSON keeps its 400", async () => {
    const merchant = await createMerchant();
    const res = await postCharge(merchant.apiKey, '{"amountUsdCents":100,');
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual(issue("malformed", ""));
  });
});

describe("POST /mcp reads its body as strictly", () => {
  const mcp = (agentKey: string, body: string | Uint8Array, contentType = "application/json") =>
    send("POST", "/mcp", agentKey, body, contentType, {
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
    });
  const call = (args: string) =>
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_balance","arguments":${args}}}`;

  it("a duplicate key: 400, a JSON-RPC parse error", async () => {
    const agent = await createAgent();
    const res = await mcp(agent.apiKey, '{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}');
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: expect.stringContaining("twice") },
    });
    const nested = await mcp(agent.apiKey, call('{"x":1,"\\u0078":2}'));
    expect(nested.status, nested.shown).toBe(400);
    expect(nested.body.error.code).toBe(-32700);
  });

  it("a lone surrogate: 400, a JSON-RPC parse error", async () => {
    const agent = await createAgent();
    const res = await mcp(agent.apiKey, call('{"chargeId":"\\ud800"}'));
    expect(res.status, res.shown).toBe(400);
    expect(res.body).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: expect.stringContaining("surrogate") },
    });
  });

  it("invalid UTF-8: 400 -32700; another charset or a BOM: 415", async () => {
    const agent = await createAgent();
    const bad = await mcp(
      agent.apiKey,
      bytesOf(utf8('{"jsonrpc":"2.0","id":1,"method":"tools/list","x":"'), [0xff], utf8('"}')),
    );
    expect(bad.status, bad.shown).toBe(400);
    expect(bad.body.error.code).toBe(-32700);
    const utf16 = await mcp(
      agent.apiKey,
      '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      "application/json; charset=utf-16",
    );
    expect(utf16.status, utf16.shown).toBe(415);
    expect(utf16.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000 } });
    const bom = await mcp(
      agent.apiKey,
      bytesOf([0xef, 0xbb, 0xbf], utf8('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')),
    );
    expect(bom.status, bom.shown).toBe(415);
  });

  it("a well-formed message still goes through, an emoji included", async () => {
    const agent = await createAgent();
    const res = await mcp(agent.apiKey, call('{"note":"\\ud83d\\ude00"}'));
    // get_balance takes no arguments: a tool error or result, but past the strict read.
    expect(res.status, res.shown).toBe(200);
    expect(res.body.jsonrpc).toBe("2.0");
  });
});

describe("the pure functions", () => {
  it("findJsonTextIssue: paths through objects and arrays, escapes, strings that look like structure", () => {
    expect(findJsonTextIssue('{"a":[{"b":1},{"b":2,"c":{"d":1,"d":2}}]}')).toMatchObject({
      code: "duplicate_key",
      path: "a.1.c.d",
    });
    expect(findJsonTextIssue('{"a":"{\\"b\\":1,\\"b\\":2}","b":[",","\\""]}')).toBeNull();
    expect(findJsonTextIssue('[{"a":1},{"a":1}]')).toBeNull();
    expect(findJsonTextIssue('{"\\\\":1,"\\u005c":2}')).toMatchObject({ code: "duplicate_key" });
    expect(findJsonTextIssue('{"a":1,"A":2}')).toBeNull();
    expect(findJsonTextIssue('[1,2,"\\udc00"]')).toMatchObject({ code: "ill_formed_unicode", path: "2" });
    expect(findJsonTextIssue('"\\ud800"')).toMatchObject({ code: "ill_formed_unicode", path: "" });
    expect(findJsonTextIssue('"\\\\ud800"')).toBeNull(); // an escaped backslash, then plain text
    expect(findJsonTextIssue('{"a":{"b":[]},"c":{"a":{}}}')).toBeNull();
    // A string ending in an escaped backslash closes at its quote; an escaped quote does not close one.
    expect(findJsonTextIssue('{"a":"x\\\\","a":1}')).toMatchObject({ code: "duplicate_key", path: "a" });
    expect(findJsonTextIssue('{"k\\"":1,"k\\"":2}')).toMatchObject({ code: "duplicate_key" });
    expect(findJsonTextIssue('{"a":"\\\\\\"","b":1,"a\\\\":2}')).toBeNull();
  });

  it("findJsonTextIssue: deep nesting needs no recursion", () => {
    const deep = `${"[".repeat(20_000)}{"a":1,"a":2}${"]".repeat(20_000)}`;
    expect(findJsonTextIssue(deep)?.code).toBe("duplicate_key");
  });

  it("declaresUtf8, hasByteOrderMark, isWellFormed", () => {
    expect(declaresUtf8("application/json")).toBe(true);
    expect(declaresUtf8(undefined)).toBe(true);
    expect(declaresUtf8("application/json; Charset=UTF-8")).toBe(true);
    expect(declaresUtf8("application/json; charset=latin1")).toBe(false);
    expect(declaresUtf8("application/json; charset=utf-8; charset=utf-16")).toBe(false);
    expect(hasByteOrderMark(new Uint8Array([0, 0, 0xfe, 0xff, 0x7b]))).toBe(true);
    expect(hasByteOrderMark(new Uint8Array([0xff, 0xfe, 0, 0]))).toBe(true);
    expect(hasByteOrderMark(utf8("{}"))).toBe(false);
    expect(hasByteOrderMark(new Uint8Array([]))).toBe(false);
    expect(isWellFormed("a😀b")).toBe(true);
    expect(isWellFormed("a\ud800b")).toBe(false);
    expect(isWellFormed("\udc00\ud800")).toBe(false);
  });

  it("readStrictJson: a lone surrogate escape that JSON.parse takes is refused", () => {
    expect(JSON.parse('"\\ud800"')).toBe("\ud800");
    expect(readStrictJson(utf8('{"x":"\\ud800"}'), "application/json")).toMatchObject({
      ok: false,
      reason: "refused",
      issue: { code: "ill_formed_unicode", path: "x" },
    });
    expect(readStrictJson(utf8('{"x":1}'), "application/json")).toEqual({ ok: true, text: '{"x":1}', value: { x: 1 } });
    expect(readStrictJson(utf8("{"), "application/json")).toEqual({ ok: false, reason: "malformed_json", text: "{" });
  });
});
