import { env } from "cloudflare:workers";
import fc from "fast-check";
import { importJWK, SignJWT } from "jose";
import { beforeAll, describe, expect, inject, it, vi } from "vitest";
import { normalizePolicy } from "../../src/agents/policy";
import { createAgent as createAgentRow } from "../../src/agents/service";
import { buildApp } from "../../src/app";
import { signConsoleToken } from "../../src/auth/jwt";
import { settingsOf } from "../../src/config/env";
import { hmacSha256Hex } from "../../src/lib/crypto";
import { base64url } from "../../src/lib/ids";
import { registerMerchant } from "../../src/merchants/service";
import { createEndpoint } from "../../src/webhooks/endpoints";
import { HS256, makeJwt, nowSeconds, randomKeyBody, validClaims } from "../helpers/auth-matrix";
import { SEED, SEED_NOTE } from "../helpers/seed";
import { receiverUrl } from "../helpers/webhooks";

/**
 * Issue #7: a property test that sends random and malformed bodies, headers
 * and path segments to every route of the app's own route table (so a new
 * route is fuzzed without anyone adding it): never a 5xx, never a stack trace
 * or "Error:" in a body, and every response that is not a redirect, an HTML
 * page or a CSV is JSON, with a string `error` when it is an error.
 *
 * Valid credentials of each kind (and a console page session with its CSRF
 * token) are among the choices, and so are the ids of real objects, so the
 * requests get past authentication and lookups into validation and handlers.
 * The app is called directly, so thousands of requests stay fast.
 */

const app = buildApp();
const ctx = {
  waitUntil: () => undefined,
  passThroughOnException: () => undefined,
  props: {},
} as unknown as ExecutionContext;
const RUNS_PER_ROUTE = 60;

const routes = app.routes
  .filter((r) => ["GET", "POST", "PUT", "PATCH", "DELETE"].includes(r.method))
  .map((r) => ({ method: r.method, path: r.path }))
  .filter((r, i, all) => all.findIndex((o) => o.method === r.method && o.path === r.path) === i);

/**
 * Real objects, made once, so some requests name things that exist. The merchant and the agent whose
 * keys the requests carry are not among the ids: a fuzzed request can roll or freeze the merchant and
 * agent it names, and one that did so to the holders of these keys left every later route refused.
 */
const real = { merchantKey: "", agentKey: "", accessAssertion: "", ids: [] as string[], badTokens: [] as string[] };

/** A Cloudflare Access assertion for the console user, signed with the test receiver's Access key (an hour's). */
async function accessAssertion(): Promise<string> {
  const key = await importJWK(inject("accessPrivateJwk"), "RS256");
  return new SignJWT({ email: "ops@example.com" })
    .setProtectedHeader({ alg: "RS256", kid: "test-access-key" })
    .setIssuer("https://agent-pay-test.cloudflareaccess.com")
    .setAudience("test-access-aud")
    .setIssuedAt()
    .setExpirationTime("1h")
    .sign(key);
}

beforeAll(async () => {
  const merchant = await registerMerchant(env, env.DB, { name: "Fuzz Shop", category: "data" });
  const agent = await createAgentRow(env, env.DB, {
    name: "fuzz agent",
    policy: normalizePolicy({ approvalThresholdUsdCents: 100 }),
  });
  real.merchantKey = merchant.apiKey;
  real.agentKey = agent.apiKey;
  // The merchant and agent the id segments name (see `real`).
  const named = {
    merchant: await registerMerchant(env, env.DB, { name: "Fuzz Target Shop", category: "data" }),
    agent: await createAgentRow(env, env.DB, { name: "fuzz target agent", policy: normalizePolicy({}) }),
  };
  real.accessAssertion = await accessAssertion();
  const consoleKey = (await signConsoleToken(settingsOf(env).consoleSessionSecret, "ops@example.com")).token;
  const send = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await app.fetch(
      new Request(`http://service.test${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
      env,
      ctx,
    );
    const parsed = (await res.json()) as Record<string, any>;
    if (res.status >= 300 && !(res.status === 402 && parsed.pendingApproval))
      throw new Error(`setup ${method} ${path}: ${res.status} ${JSON.stringify(parsed)}`);
    return parsed;
  };
  await send("POST", `/console/agents/${agent.agentId}/credits`, consoleKey, { amountUsdCents: 100_000 });
  const charge = await send("POST", "/merchant/charges", merchant.apiKey, { amountUsdCents: 500 });
  const held = await send("POST", "/merchant/charges", merchant.apiKey, { amountUsdCents: 400 });
  const approval = await send("POST", `/charges/${held.chargeId}/pay`, agent.apiKey);
  const link = await send("POST", "/merchant/checkout", merchant.apiKey, {
    amountUsdCents: 50,
    description: "fuzz link",
  });
  const paylink = await send("POST", "/merchant/paylinks", merchant.apiKey, { budgetUsdCents: 5000 });
  await send("POST", `/pl/${paylink.code}/accept`, agent.apiKey);
  const endpoint = await createEndpoint(env.DB, settingsOf(env).webhookSecretsKey, {
    url: `${receiverUrl()}/hooks/ok-fuzz`,
    events: [],
    merchantId: merchant.merchantId,
    createdBy: "ops@example.com",
  });
  // Well-formed credentials that must be refused: JWT negatives, unknown keys, real keys with junk.
  real.badTokens = [
    await makeJwt(HS256, validClaims(), "not-the-console-session-secret-0123456789abcdef"),
    await makeJwt(HS256, validClaims({ iat: nowSeconds() - 7200, exp: nowSeconds() - 3600 })),
    await makeJwt(HS256, validClaims({ exp: undefined })),
    await makeJwt({ alg: "none", typ: "JWT" }, validClaims(), null),
    await makeJwt({ alg: "HS512", typ: "JWT" }, validClaims()),
    await makeJwt(HS256, validClaims({ aud: "merchant" })),
    await makeJwt(HS256, validClaims({ sub: "intruder@example.com" })),
    `sk_mch_${randomKeyBody()}`,
    `svc_sk_${randomKeyBody()}`,
    `${merchant.apiKey}x`,
    agent.apiKey.slice(0, -1),
    `${consoleKey}.extra`,
  ];
  real.ids = [
    named.merchant.merchantId,
    named.agent.agentId,
    charge.chargeId,
    held.chargeId,
    approval.approvalId,
    link.checkoutToken,
    link.checkoutLinkId,
    paylink.code,
    endpoint.row.id,
    "whd_doesnotexist",
  ];
});

// ---------------------------------------------------------------------------
// Generators

/** Printable ASCII (what a header value may portably hold). */
const headerText = (maxLength: number) =>
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength });

/** Never "Error" in what we send, so any "Error:" in a body came from the service itself. */
const noErrorWord = (s: string) => !/error/i.test(s);

const NASTY_SEGMENTS = [
  "..",
  ".",
  "%2e%2e",
  "%2E%2E%2F",
  "%00",
  "a%00b",
  "%0D%0A",
  "a%0D%0ALocation:%20https://evil.example",
  "%0A",
  "%",
  "%zz",
  "%E0%A4%A",
  "%C0%AE%C0%AE",
  "a%2Fb",
  "%5C..%5C",
  ";",
  "~",
  "%20",
  "%F0%9F%98%80",
  "'%20OR%201=1%20--",
  "1'%3B%20DROP%20TABLE%20merchants%3B--",
  "%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E",
  "null",
  "undefined",
  "NaN",
  "-1",
  "0",
  "1e309",
  "__proto__",
  "constructor",
  "x".repeat(65),
  "y".repeat(3000),
  `chg_${"0".repeat(200)}`,
];

/** Percent-encodes as UTF-8; a lone surrogate (which has no UTF-8 form) becomes U+FFFD, as a browser would send it. */
const encodeSegment = (s: string) =>
  encodeURIComponent(s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD"));

/** A path parameter: a real id, a nasty raw segment, or random text (unicode, long, SQL-ish) percent-encoded. */
const segment = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .constant(null)
      .map(() => real.ids)
      .chain((ids) => fc.constantFrom(...ids)),
  },
  { weight: 3, arbitrary: fc.constantFrom(...NASTY_SEGMENTS) },
  {
    weight: 2,
    arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }).filter(noErrorWord).map(encodeSegment),
  },
  {
    weight: 1,
    arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 20 }).filter(noErrorWord).map(encodeSegment),
  },
  { weight: 1, arbitrary: fc.string({ minLength: 100, maxLength: 5000 }).filter(noErrorWord).map(encodeSegment) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        "' OR '1'='1",
        "1; SELECT * FROM agents",
        '" UNION SELECT api_key_hash FROM merchants --',
        "../../etc/passwd",
        "\u0000",
        "😀".repeat(50),
      )
      .map(encodeSegment),
  },
);

const QUERY_KEYS = ["limit", "from", "to", "status", "afterSeq", "notice", "code", "email", "x"];
const queryValue = fc.oneof(
  fc.constantFrom(
    "",
    "0",
    "-1",
    "1",
    "100",
    "501",
    "1e3",
    "abc",
    "2026-02-30",
    "2026-13-01",
    "0000-00-00",
    "2026-01-01",
    "9999-99-99",
    "pending",
    "'--",
    "%",
    "%zz",
    "%00",
    "x".repeat(2000),
  ),
  fc.string({ maxLength: 30 }).filter(noErrorWord).map(encodeSegment),
);
const query = fc.option(
  fc
    .array(fc.tuple(fc.constantFrom(...QUERY_KEYS), queryValue), { minLength: 1, maxLength: 4 })
    .map((pairs) => `?${pairs.map(([k, v]) => `${k}=${v}`).join("&")}`),
  { nil: "" },
);

const FIELD_NAMES = [
  "name",
  "category",
  "amountUsdCents",
  "description",
  "externalId",
  "address",
  "chain",
  "reason",
  "email",
  "code",
  "url",
  "events",
  "merchantId",
  "agentId",
  "active",
  "policy",
  "budgetUsdCents",
  "perChargeUsdCents",
  "maxUses",
  "expiresInHours",
  "graceSeconds",
  "reference",
  "maxPerTransactionUsdCents",
  "dailyLimitUsdCents",
  "allowedCategories",
  "approvalThresholdUsdCents",
  "_csrf",
  "balanceMinor",
  "status",
  "amount",
  "decision",
];

const jsonish = fc.jsonValue({ maxDepth: 3 }).filter((v) => noErrorWord(JSON.stringify(v) ?? ""));

/** Bodies: random JSON, shaped-but-wrong objects, non-JSON text, broken JSON, bytes, forms, and an oversized one now and then. */
const body = fc.oneof(
  { weight: 3, arbitrary: jsonish.map((v) => JSON.stringify(v)) },
  {
    weight: 4,
    arbitrary: fc.dictionary(fc.constantFrom(...FIELD_NAMES), jsonish, { maxKeys: 5 }).map((o) => JSON.stringify(o)),
  },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 300 }).filter(noErrorWord) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "",
      "{",
      "}",
      "[",
      '{"a":',
      "null",
      "true",
      "0",
      '"str"',
      "[]",
      "{}",
      '{"amountUsdCents":1e309}',
      '{"amountUsdCents":-0}',
      '{"amountUsdCents":9007199254740993}',
      '{"amountUsdCents":"10"}',
      '{"__proto__":{"admin":true}}',
      '{"constructor":{"prototype":{}}}',
      "\uFEFF{}",
      "[".repeat(5000) + "]".repeat(5000),
      JSON.stringify({ name: "x".repeat(60_000) }),
      "a=b&c=d",
      "_csrf=&name=x",
      '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n--x--\r\n',
      "--x\r\ngarbage",
      "NaN",
      "Infinity",
      "{'single': 'quotes'}",
      '{"a":1,"a":2}',
    ),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 64 * 1024 - 16, max: 80 * 1024 }).map((n) => `{"name":"${"z".repeat(n)}"}`),
  },
  {
    weight: 1,
    arbitrary: fc
      .dictionary(fc.constantFrom(...FIELD_NAMES), fc.string({ maxLength: 20 }).filter(noErrorWord), { maxKeys: 4 })
      .map((o) => new URLSearchParams(o).toString()),
  },
);

const contentType = fc.oneof(
  fc.constantFrom(
    undefined,
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/json; charset=utf-16",
    "text/plain",
    "text/html",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "multipart/form-data",
    "multipart/form-data; boundary=",
    "application/xml",
    "application/octet-stream",
    "garbage",
    "application/json, text/plain",
    "*/*",
  ),
  headerText(60).filter(noErrorWord),
);

const idempotencyKey = fc.oneof(
  fc.constant(undefined),
  fc
    .string({ unit: "binary-ascii", minLength: 1, maxLength: 40 })
    .filter((s) => /^[\x20-\x7e]+$/.test(s) && noErrorWord(s)),
  fc.constantFrom("", " ", "key with spaces", "x".repeat(255), "x".repeat(256), "tab\tinside", "fuzz-shared-key"),
  headerText(300).filter(noErrorWord),
);

type CredentialChoice =
  | { kind: "header"; value: string }
  | { kind: "valid"; who: "merchant" | "agent" | "console"; prefix: string }
  /** A valid Cloudflare Access assertion (Cf-Access-Jwt-Assertion), the Access sign-in's credential. */
  | { kind: "access" }
  | { kind: "none" };

const credential: fc.Arbitrary<CredentialChoice> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: "none" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "access" as const }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("valid" as const),
      who: fc.constantFrom("merchant" as const, "agent" as const, "console" as const),
      prefix: fc.constantFrom("Bearer ", "Bearer ", "bearer ", "Bearer   "),
    }),
  },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          "",
          "Bearer",
          "Bearer ",
          "Basic Zm9vOmJhcg==",
          "Token abc",
          "Bearer a b",
          "Bearer a.b.c",
          "Bearer ..",
          "Bearer sk_mch_short",
          "Bearer svc_sk_",
          "Bearer whsec_x",
          `Bearer ${"x".repeat(8000)}`,
          "Bearer eyJhbGciOiJub25lIn0.e30.",
          `Bearer sk_mch_${"A".repeat(43)}`,
          `Bearer svc_sk_${"A".repeat(43)}`,
          `Bearer sk_mch_${"A".repeat(44)}`,
        ),
        headerText(100).filter(noErrorWord),
        headerText(100)
          .filter(noErrorWord)
          .map((t) => `Bearer ${t}`),
        fc
          .constant(null)
          .chain(() => fc.constantFrom(...real.badTokens))
          .map((t) => `Bearer ${t}`),
      )
      .map((value) => ({ kind: "header" as const, value })),
  },
);

/** Cookies for the console pages: none, junk, or a real page session (and a pre-session for the sign-in forms). */
const cookie = fc.constantFrom("none", "none", "junk", "session", "session", "presession") as fc.Arbitrary<
  "none" | "junk" | "session" | "presession"
>;

/** Whether a form body carries the right CSRF token for the cookie sent. */
const withCsrf = fc.boolean();

const paymentHeader = fc.option(
  fc.oneof(
    headerText(80).filter(noErrorWord),
    jsonish.map((v) => btoa(JSON.stringify(v))),
    fc.constantFrom(
      "",
      "e30=",
      btoa(
        JSON.stringify({
          x402Version: 1,
          scheme: "exact",
          network: "base-sepolia",
          payload: { signature: "0x00", authorization: {} },
        }),
      ),
    ),
  ),
  { nil: undefined },
);

// ---------------------------------------------------------------------------
// Sending and checking

const secret = () => settingsOf(env).consoleSessionSecret;

/** A fresh console token each time: one of the fuzzed routes signs sessions out. */
async function freshConsole(): Promise<{ token: string; jti: string }> {
  const { token } = await signConsoleToken(secret(), "ops@example.com");
  const payload = JSON.parse(atob(token.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/"))) as { jti: string };
  return { token, jti: payload.jti };
}

const seen = new Map<string, Set<number>>();

interface Sample {
  segments: string[];
  query: string;
  body: string | Uint8Array;
  contentType: string | undefined;
  credential: CredentialChoice;
  idempotencyKey: string | undefined;
  cookie: "none" | "junk" | "session" | "presession";
  withCsrf: boolean;
  payment: string | undefined;
}

async function send(route: { method: string; path: string }, s: Sample) {
  let i = 0;
  const path = route.path.replace(/:(\w+)(\{([^}]*)\})?/g, (_m, _name: string, _p?: string, pattern?: string) => {
    const value = s.segments[i++ % s.segments.length]!;
    // A constrained parameter gets one of its allowed values half the time.
    const allowed = pattern?.split("|") ?? [];
    return allowed.length > 0 && value.length % 2 === 0 ? allowed[(value.length / 2) % allowed.length]! : value;
  });
  const headers = new Headers();
  if (s.contentType !== undefined) headers.set("content-type", s.contentType);
  if (s.idempotencyKey !== undefined) headers.set("idempotency-key", s.idempotencyKey);
  if (s.payment !== undefined) headers.set("x-payment", s.payment);
  if (s.credential.kind === "header") headers.set("authorization", s.credential.value);
  if (s.credential.kind === "access") headers.set("cf-access-jwt-assertion", real.accessAssertion);
  if (s.credential.kind === "valid") {
    const token =
      s.credential.who === "merchant"
        ? real.merchantKey
        : s.credential.who === "agent"
          ? real.agentKey
          : (await freshConsole()).token;
    headers.set("authorization", `${s.credential.prefix}${token}`);
  }
  let bodyToSend: string | Uint8Array = s.body;
  if (s.cookie === "junk") headers.set("cookie", "console_session=junk.junk.junk; console_presession=%%%");
  if (s.cookie === "session") {
    const session = await freshConsole();
    headers.set("cookie", `console_session=${session.token}`);
    if (s.withCsrf && typeof s.body === "string") {
      bodyToSend = `_csrf=${await hmacSha256Hex(secret(), `console-csrf:${session.jti}`)}${s.body.length > 0 ? "&" : ""}${s.body}`;
      headers.set("content-type", "application/x-www-form-urlencoded");
    }
  }
  if (s.cookie === "presession") {
    const binding = base64url(crypto.getRandomValues(new Uint8Array(16)));
    headers.set("cookie", `console_presession=${binding}`);
    if (s.withCsrf && typeof s.body === "string") {
      bodyToSend = `_csrf=${await hmacSha256Hex(secret(), `console-csrf:pre:${binding}`)}${s.body.length > 0 ? "&" : ""}${s.body}`;
      headers.set("content-type", "application/x-www-form-urlencoded");
    }
  }
  const hasBody = route.method !== "GET";
  const request = new Request(`http://service.test${path}${s.query}`, {
    method: route.method,
    headers,
    body: hasBody ? bodyToSend : undefined,
    redirect: "manual",
  });
  const response = await app.fetch(request, env, ctx);
  return { path, request, response, text: await response.text() };
}

/** A V8 stack frame: "\n    at name (file.js:1:2)" or "at file:///x.mjs:1:2". */
const STACK_FRAME = /\n\s*at\s|\(\S+\.(?:js|mjs|cjs|ts|tsx):\d+:\d+\)|\bat\s+\S+\.(?:js|mjs|cjs|ts|tsx):\d+:\d+/;

type Sent = Awaited<ReturnType<typeof send>>;

const describeSent = (route: { method: string }, sent: Sent, s: Sample) =>
  `${route.method} ${sent.path.slice(0, 160)}${s.query.slice(0, 100)} (content-type ${JSON.stringify(s.contentType)}, credential ${s.credential.kind === "valid" ? s.credential.who : s.credential.kind}, cookie ${s.cookie}${s.withCsrf ? "+csrf" : ""}) -> ${sent.response.status} ${sent.response.headers.get("content-type") ?? ""} ${sent.text.slice(0, 200)}`;

/**
 * What is wrong with an answer on the hard side: a 5xx (named by the error the
 * service logged for its request id), a stack trace, or "Error:" in the body.
 */
function serverProblem(sent: Sent, logged: Map<string, string>): string | null {
  const { response, text } = sent;
  if (response.status >= 500 || response.status < 200) {
    const requestId = /"requestId":"([^"]+)"/.exec(text)?.[1];
    return `${response.status}: ${(requestId && logged.get(requestId)) ?? text.slice(0, 120)}`;
  }
  if (STACK_FRAME.test(text)) return `stack trace in a ${response.status} body`;
  if (text.includes("Error:")) return `"Error:" in a ${response.status} body`;
  return null;
}

/**
 * The shape: a redirect (with a Location), an HTML page or a CSV, or else
 * JSON, and an error status carries a string `error`. Returns what is wrong, or null.
 */
function shapeProblem(sent: Sent): string | null {
  const { response, text } = sent;
  const status = response.status;
  const type = response.headers.get("content-type") ?? "";
  if (status >= 300 && status < 400)
    return response.headers.get("location") ? null : `${status} redirect without a Location`;
  if (type.includes("text/html") || type.includes("text/csv")) return null;
  const what = `${status} ${type || "(no content-type)"} ${JSON.stringify(text.slice(0, 60))}`;
  if (!type.includes("application/json")) return `not JSON: ${what}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return `unparseable JSON: ${what}`;
  }
  // The one 4xx that is not an error: a payment held for a human (interface: 402 with `pendingApproval: true` and a reason).
  const held =
    status === 402 &&
    typeof parsed === "object" &&
    parsed !== null &&
    (parsed as { pendingApproval?: unknown }).pendingApproval === true &&
    typeof (parsed as { reason?: unknown }).reason === "string";
  // The MCP endpoint speaks JSON-RPC 2.0 (MCP streamable HTTP transport): the transport's protocol refusals (406 without
  // MCP's Accept header, 415, unparseable JSON or JSON-RPC) are JSON-RPC error objects, `error: { code, message }`, which is
  // what MCP clients read. Only those: /mcp's own refusals (401, 403, 405, 413) still carry a string error.
  const rpcError = (parsed ?? {}) as { jsonrpc?: unknown; error?: { code?: unknown; message?: unknown } | null };
  const jsonRpcRefusal =
    sent.path === "/mcp" &&
    status >= 400 &&
    status < 500 &&
    rpcError.jsonrpc === "2.0" &&
    typeof rpcError.error?.code === "number" &&
    typeof rpcError.error.message === "string";
  if (
    status >= 400 &&
    !held &&
    !jsonRpcRefusal &&
    (parsed === null || typeof parsed !== "object" || typeof (parsed as { error?: unknown }).error !== "string")
  )
    return `no string error: ${what}`;
  return null;
}

const sample: fc.Arbitrary<Sample> = fc.record({
  segments: fc.array(segment, { minLength: 3, maxLength: 3 }),
  query,
  body,
  contentType,
  credential,
  idempotencyKey,
  cookie,
  withCsrf,
  payment: paymentHeader,
});

/**
 * Inputs that once found a bug, tried first on every route (fast-check `examples`),
 * so they are never left to chance: a multipart body without a usable boundary
 * from a signed-in page session, a path parameter with CR LF or NUL that a page
 * puts into its redirect, and a date that has the right shape but is not a date.
 */
const KNOWN_NASTY: Sample[] = [
  {
    segments: ["x", "y", "z"],
    query: "",
    body: "x",
    contentType: "multipart/form-data",
    credential: { kind: "none" },
    idempotencyKey: undefined,
    cookie: "session",
    withCsrf: false,
    payment: undefined,
  },
  {
    segments: ["x", "y", "z"],
    query: "",
    body: "garbage",
    contentType: "multipart/form-data; boundary=x",
    credential: { kind: "none" },
    idempotencyKey: undefined,
    cookie: "presession",
    withCsrf: false,
    payment: undefined,
  },
  {
    segments: ["%0D%0ASet-Cookie:%20x=1", "%00", "%00"],
    query: "",
    body: "amount=abc&maxPerTransactionUsdCents=abc",
    contentType: "application/x-www-form-urlencoded",
    credential: { kind: "none" },
    idempotencyKey: undefined,
    cookie: "session",
    withCsrf: true,
    payment: undefined,
  },
  {
    segments: ["x", "y", "z"],
    query: "?from=2026-01-01&to=2026-13-01",
    body: "{}",
    contentType: "application/json",
    credential: { kind: "valid", who: "console", prefix: "Bearer " },
    idempotencyKey: undefined,
    cookie: "session",
    withCsrf: false,
    payment: undefined,
  },
];

/**
 * One request with each valid credential, tried on every route after those (fast-check `examples`): each
 * route is reached past its credential check whatever the seed draws (the last test says it was). The
 * console's with a page session and its CSRF token too, for the console pages' forms.
 */
const EACH_CREDENTIAL: Sample[] = [
  ...(["merchant", "agent", "console"] as const).map(
    (who): Sample => ({
      segments: ["x", "y", "z"],
      query: "",
      body: "",
      contentType: "application/json",
      credential: { kind: "valid", who, prefix: "Bearer " },
      idempotencyKey: undefined,
      cookie: who === "console" ? "session" : "none",
      withCsrf: who === "console",
      payment: undefined,
    }),
  ),
  {
    segments: ["x", "y", "z"],
    query: "",
    body: "{}",
    contentType: "application/json",
    credential: { kind: "access" },
    idempotencyKey: undefined,
    cookie: "none",
    withCsrf: false,
    payment: undefined,
  },
];

describe("fuzzing every route of the route table", () => {
  it("the route table is what the app serves", () => {
    expect(routes.length).toBeGreaterThan(50);
    expect(routes).toContainEqual({ method: "POST", path: "/charges/:chargeId/pay" });
    expect(routes).toContainEqual({ method: "POST", path: "/console/ui/approvals/:id/:decision{grant|reject}" });
    // Every concrete route of the table is fuzzed; only middleware (ALL) is left out.
    expect(new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`)).size).toBe(
      routes.length,
    );
  });

  it("the request builder reaches past authentication with each kind of credential", async () => {
    const base: Sample = {
      segments: ["a", "b", "c"],
      query: "",
      body: "{}",
      contentType: "application/json",
      credential: { kind: "none" },
      idempotencyKey: undefined,
      cookie: "none",
      withCsrf: false,
      payment: undefined,
    };
    seen
      .set("GET /merchant/me", new Set())
      .set("GET /balance", new Set())
      .set("GET /console/users", new Set())
      .set("GET /console/ui", new Set())
      .set("POST /console/ui/kyt", new Set())
      .set("POST /console/auth/access", new Set());
    const ok = async (method: string, path: string, s: Partial<Sample>) =>
      (await send({ method, path }, { ...base, ...s })).response.status;
    expect(await ok("GET", "/merchant/me", { credential: { kind: "valid", who: "merchant", prefix: "Bearer " } })).toBe(
      200,
    );
    expect(await ok("GET", "/balance", { credential: { kind: "valid", who: "agent", prefix: "bearer " } })).toBe(200);
    expect(
      await ok("GET", "/console/users", { credential: { kind: "valid", who: "console", prefix: "Bearer   " } }),
    ).toBe(200);
    expect(await ok("GET", "/console/ui", { cookie: "session" })).toBe(200);
    expect(await ok("POST", "/console/auth/access", { credential: { kind: "access" } })).toBe(200);
    expect(
      await ok("POST", "/console/ui/kyt", {
        cookie: "session",
        withCsrf: true,
        body: "address=0x1111111111111111111111111111111111111111",
      }),
    ).toBe(200);
  });

  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    /** Problems seen on this route, each with the first request that showed it. */
    const failures = new Map<string, string>();
    const problems = new Map<string, string>();
    let answered = 0;

    // The run goes on past a failure, so one bug cannot hide another (or the shape check) on the same route.
    it(`${key}: never a 5xx, never a stack trace`, async () => {
      seen.set(key, new Set());
      const logged = new Map<string, string>();
      const errorLog = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
        const line = args.map(String).join(" ");
        const requestId = /"requestId":"([^"]+)"/.exec(line)?.[1];
        if (requestId) logged.set(requestId, /"error":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? line);
      });
      try {
        await fc.assert(
          fc.asyncProperty(sample, async (s) => {
            const sent = await send(route, s);
            answered++;
            seen.get(key)!.add(sent.response.status);
            const failure = serverProblem(sent, logged);
            if (failure && !failures.has(failure)) failures.set(failure, describeSent(route, sent, s));
            const problem = shapeProblem(sent);
            if (problem && !problems.has(problem)) problems.set(problem, describeSent(route, sent, s));
          }),
          {
            numRuns: RUNS_PER_ROUTE,
            seed: SEED,
            examples: [...KNOWN_NASTY, ...EACH_CREDENTIAL].map((example) => [example] as [Sample]),
          },
        );
      } finally {
        errorLog.mockRestore();
      }
      // Examples count towards numRuns.
      expect(answered).toBe(RUNS_PER_ROUTE);
      expect(Object.fromEntries(failures), SEED_NOTE).toEqual({});
    });

    it(`${key}: every answer is a redirect, a page, a CSV or JSON, and errors carry a string error`, () => {
      expect(answered, "the route was fuzzed").toBeGreaterThan(0);
      expect(Object.fromEntries(problems), SEED_NOTE).toEqual({});
    });
  }

  it("every route was reached past its credential check at least once", () => {
    // A fuzzer that only ever hears 401, 403 or a sign-in redirect has not tested the route.
    const stuck = routes
      .map((r) => `${r.method} ${r.path}`)
      .filter((k) => [...(seen.get(k) ?? [])].every((status) => status === 401 || status === 403 || status === 303));
    const heard = Object.fromEntries(stuck.map((k) => [k, [...(seen.get(k) ?? [])].sort()]));
    expect(stuck, `${SEED_NOTE}; what each stuck route answered: ${JSON.stringify(heard)}`).toEqual([]);
  });
});
