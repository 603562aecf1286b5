import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, type MockInstance, vi } from "vitest";
import { normalizePolicy } from "../../src/agents/policy";
import { createAgent as createAgentRow } from "../../src/agents/service";
import { settingsOf } from "../../src/config/env";
import { dbOf } from "../../src/db/client";
import { sha256Hex } from "../../src/lib/crypto";
import { registerMerchant } from "../../src/merchants/service";
import { createEndpoint } from "../../src/webhooks/endpoints";
import { api, consoleToken } from "../helpers/api";
import { receiverUrl, waitForReceived } from "../helpers/webhooks";

/**
 * Issue #7: after creating 1,000 keys and secrets, no plaintext key or secret
 * appears in D1, in Durable Object storage or in the logs. API keys are kept
 * only as their SHA-256; webhook signing secrets only AES-GCM encrypted.
 *
 * The bulk (400 merchant keys, 400 agent keys, 200 webhook secrets) is created
 * through the service functions, which is what every route calls; a handful
 * more are issued through the API itself, the way a client gets them
 * (including with an Idempotency-Key, as a retrying client sends), and the
 * wallets, the ledger and a PayLink grant object are made to do real work.
 */

const PREFIXES = { merchant: "sk_mch_", agent: "svc_sk_", webhook: "whsec_" } as const;
type SecretKind = keyof typeof PREFIXES;
const SECRET_BODY = /^[A-Za-z0-9_-]{43}$/;

interface Issued {
  kind: SecretKind;
  /** Where it came from, for failure messages. */
  via: "service" | "api" | "api with Idempotency-Key";
  value: string;
}

/** The random part after the prefix: 43 base64url characters. */
const secretPartOf = (issued: Issued) => issued.value.slice(PREFIXES[issued.kind].length);

/**
 * Finds which issued secrets occur in `text`: every 43-character window of
 * every base64url run is looked up, so a key is found whether it is stored
 * whole, without its prefix, or inside a longer token or a JSON document.
 */
function leakedIn(text: string, bySecretPart: Map<string, Issued>): Issued[] {
  const found = new Map<string, Issued>();
  for (const run of text.match(/[A-Za-z0-9_-]{43,}/g) ?? []) {
    for (let i = 0; i + 43 <= run.length; i++) {
      const hit = bySecretPart.get(run.slice(i, i + 43));
      if (hit) found.set(hit.value, hit);
    }
  }
  return [...found.values()];
}

function describeLeak(where: string, leaks: Issued[]): string {
  if (leaks.length === 0) return "";
  const counts = new Map<string, number>();
  for (const l of leaks)
    counts.set(`${l.kind} secret issued via ${l.via}`, (counts.get(`${l.kind} secret issued via ${l.via}`) ?? 0) + 1);
  return `${where} holds ${leaks.length} plaintext secret(s): ${[...counts].map(([what, n]) => `${n} × ${what}`).join(", ")}`;
}

const CONSOLE_LEVELS = ["log", "info", "warn", "error", "debug"] as const;
const SERVICE_COUNTS = { merchant: 400, agent: 400, webhook: 200 };

const issued: Issued[] = [];
const bySecretPart = new Map<string, Issued>();
const sampleMerchants: { merchantId: string; apiKey: string }[] = [];
const sampleAgents: { agentId: string; apiKey: string }[] = [];
const workAgents: string[] = [];
const grantIds: string[] = [];
let hookName = "";
let spies: MockInstance[] = [];

const remember = (kind: SecretKind, via: Issued["via"], value: string) => {
  const entry = { kind, via, value };
  issued.push(entry);
  bySecretPart.set(secretPartOf(entry), entry);
};

/** Runs `count` creations, `width` at a time. */
async function inBatches<T>(count: number, width: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let start = 0; start < count; start += width) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, j) => make(start + j)))));
  }
  return out;
}

async function expectOk(res: Awaited<ReturnType<typeof api>>, status: number, what: string): Promise<any> {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.body;
}

beforeAll(async () => {
  spies = CONSOLE_LEVELS.map((level) => vi.spyOn(console, level));
  const _db = dbOf(env.DB);
  const secretsKey = settingsOf(env).webhookSecretsKey;

  // The bulk: 1,000 keys and secrets through the service functions.
  const merchants = await inBatches(SERVICE_COUNTS.merchant, 25, (i) =>
    registerMerchant(env, env.DB, { name: `secrets bulk merchant ${i}`, category: "data" }),
  );
  for (const m of merchants) remember("merchant", "service", m.apiKey);
  sampleMerchants.push(...merchants.slice(0, 10));
  const agents = await inBatches(SERVICE_COUNTS.agent, 25, (i) =>
    createAgentRow(env, env.DB, { name: `secrets bulk agent ${i}`, policy: normalizePolicy(undefined) }),
  );
  for (const a of agents) remember("agent", "service", a.apiKey);
  sampleAgents.push(...agents.slice(0, 10));
  // Scoped to a bulk merchant that never has events, so none of them is ever sent to.
  const quietMerchant = merchants[0]!.merchantId;
  const endpoints = await inBatches(SERVICE_COUNTS.webhook, 25, (i) =>
    createEndpoint(env.DB, secretsKey, {
      url: `https://hooks.example.com/secrets/${i}`,
      events: [],
      merchantId: quietMerchant,
      createdBy: "ops@example.com",
    }),
  );
  for (const e of endpoints) remember("webhook", "service", e.secret);

  // A few more through the API, as clients get them; some with an Idempotency-Key.
  const token = await consoleToken();
  const idem = (name: string) => ({ "Idempotency-Key": `secrets-at-rest-${name}-${crypto.randomUUID()}` });
  const merchant = await expectOk(
    await api("POST", "/merchants", {
      token,
      body: { name: "Secrets Shop", category: "data" },
      headers: idem("merchant"),
    }),
    201,
    "POST /merchants",
  );
  remember("merchant", "api with Idempotency-Key", merchant.apiKey);
  const other = await expectOk(
    await api("POST", "/merchants", { token, body: { name: "Secrets Shop 2" } }),
    201,
    "POST /merchants",
  );
  remember("merchant", "api", other.apiKey);
  const payer = await expectOk(
    await api("POST", "/console/agents", { token, body: { name: "secrets payer" }, headers: idem("agent") }),
    201,
    "POST /console/agents",
  );
  remember("agent", "api with Idempotency-Key", payer.apiKey);
  const careful = await expectOk(
    await api("POST", "/console/agents", {
      token,
      body: { name: "secrets careful", policy: { approvalThresholdUsdCents: 50 } },
    }),
    201,
    "POST /console/agents",
  );
  remember("agent", "api", careful.apiKey);
  const drawer = await expectOk(
    await api("POST", "/console/agents", { token, body: { name: "secrets drawer" } }),
    201,
    "POST /console/agents",
  );
  remember("agent", "api", drawer.apiKey);
  workAgents.push(payer.agentId, careful.agentId, drawer.agentId);

  hookName = `ok-secrets-${crypto.randomUUID()}`;
  const hook = await expectOk(
    await api("POST", "/settings/webhooks", {
      token,
      body: { url: `${receiverUrl()}/hooks/${hookName}`, merchantId: merchant.merchantId },
      headers: idem("webhook"),
    }),
    201,
    "POST /settings/webhooks",
  );
  remember("webhook", "api with Idempotency-Key", hook.secret);
  const rotated = await expectOk(
    await api("POST", `/settings/webhooks/${hook.id}/rotate-secret`, {
      token,
      body: { graceSeconds: 3600 },
      headers: idem("rotate"),
    }),
    200,
    "rotate-secret",
  );
  remember("webhook", "api with Idempotency-Key", rotated.secret);

  // Work for the Durable Objects: credits, a payment, a payment held for approval, a PayLink draw.
  for (const agentId of workAgents) {
    await expectOk(
      await api("POST", `/console/agents/${agentId}/credits`, {
        token,
        body: { amountUsdCents: 1000, reference: "secrets-at-rest" },
        headers: idem(`credit-${agentId}`),
      }),
      200,
      "credit",
    );
  }
  const charge = await expectOk(
    await api("POST", "/merchant/charges", {
      token: merchant.apiKey,
      body: { amountUsdCents: 300 },
      headers: idem("charge"),
    }),
    201,
    "charge",
  );
  await expectOk(
    await api("POST", `/charges/${charge.chargeId}/pay`, { token: payer.apiKey, headers: idem("pay") }),
    200,
    "pay",
  );
  const held = await expectOk(
    await api("POST", "/merchant/charges", { token: merchant.apiKey, body: { amountUsdCents: 200 } }),
    201,
    "charge",
  );
  const heldPay = await api("POST", `/charges/${held.chargeId}/pay`, { token: careful.apiKey });
  if (heldPay.status !== 402 || heldPay.body.pendingApproval !== true)
    throw new Error(`a payment over the approval threshold should be held: ${heldPay.status} ${heldPay.text}`);
  const paylink = await expectOk(
    await api("POST", "/merchant/paylinks", { token: merchant.apiKey, body: { budgetUsdCents: 500 } }),
    201,
    "paylink",
  );
  const code = paylink.code as string;
  const accepted = await expectOk(await api("POST", `/pl/${code}/accept`, { token: drawer.apiKey }), 200, "accept");
  grantIds.push(accepted.grantId);
  await expectOk(
    await api("POST", `/merchant/paylinks/${code}/charge`, {
      token: merchant.apiKey,
      body: { agentId: drawer.agentId, amountUsdCents: 100 },
    }),
    200,
    "draw",
  );

  // Credentials that are refused are not logged either.
  await api("GET", "/merchant/me", { token: payer.apiKey });
  await api("GET", "/balance", { token: merchant.apiKey });
  await api("GET", "/balance", { token: `${payer.apiKey}x` });

  // The paid charge reaches the receiver signed with the endpoint's secret, so deliveries and attempts are stored too.
  await waitForReceived(hookName, (list) =>
    list.some((d) => d.body.includes(charge.chargeId) && d.body.includes("charge.succeeded")),
  );
  // A thousand secrets (and an address derived for each agent) are CPU work: some 15 s alone on the
  // 2-core machine, beyond 60 s once while two other test files ran at once on a loaded machine.
}, 180_000);

afterAll(() => {
  for (const spy of spies) spy.mockRestore();
});

/** Every user table of D1, every row, every column read as text (and blobs also as hex). */
async function dumpD1(): Promise<{ table: string; column: string; text: string }[]> {
  const tables = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name != 'd1_migrations' ORDER BY name",
  ).all<{ name: string }>();
  const out: { table: string; column: string; text: string }[] = [];
  for (const { name } of tables.results) {
    const columns = (await env.DB.prepare(`PRAGMA table_info("${name}")`).all<{ name: string }>()).results.map(
      (c) => c.name,
    );
    const select = columns
      .map((c, i) => `CAST("${c}" AS TEXT) AS c${i}, CASE WHEN typeof("${c}") = 'blob' THEN hex("${c}") END AS h${i}`)
      .join(", ");
    const cells = columns.map(() => [] as string[]);
    for (let offset = 0; ; offset += 1000) {
      const page = await env.DB.prepare(`SELECT ${select} FROM "${name}" LIMIT 1000 OFFSET ${offset}`).all<
        Record<string, string | null>
      >();
      for (const row of page.results) {
        columns.forEach((_, i) => {
          cells[i]!.push(row[`c${i}`] ?? "", row[`h${i}`] ?? "");
        });
      }
      if (page.results.length < 1000) break;
    }
    for (const [i, column] of columns.entries()) out.push({ table: name, column, text: cells[i]!.join("\n") });
  }
  return out;
}

let dumped: ReturnType<typeof dumpD1> | undefined;
const d1Dump = () => (dumped ??= dumpD1());

describe("secrets at rest", () => {
  it("issued 1,000 distinct keys and secrets through the service, and more through the API", () => {
    const fromService = issued.filter((s) => s.via === "service");
    expect(fromService).toHaveLength(1000);
    expect(fromService.filter((s) => s.kind === "merchant")).toHaveLength(SERVICE_COUNTS.merchant);
    expect(fromService.filter((s) => s.kind === "agent")).toHaveLength(SERVICE_COUNTS.agent);
    expect(fromService.filter((s) => s.kind === "webhook")).toHaveLength(SERVICE_COUNTS.webhook);
    expect(issued.filter((s) => s.via === "api").length).toBe(3);
    expect(issued.filter((s) => s.via === "api with Idempotency-Key").length).toBe(4);
    expect(bySecretPart.size).toBe(issued.length);
    for (const s of issued) {
      expect(s.value.startsWith(PREFIXES[s.kind])).toBe(true);
      expect(secretPartOf(s)).toMatch(SECRET_BODY);
    }
  });

  it("the scanner finds a key stored whole, without its prefix, or inside other text", () => {
    // Guards the guard: a scan that could never find anything would pass vacuously.
    const [m, a, w] = [
      issued.find((s) => s.kind === "merchant")!,
      issued.find((s) => s.kind === "agent")!,
      issued.find((s) => s.kind === "webhook")!,
    ];
    expect(leakedIn(JSON.stringify({ authorization: `Bearer ${m.value}` }), bySecretPart)).toEqual([m]);
    expect(leakedIn(`x${secretPartOf(a)}y`, bySecretPart)).toEqual([a]);
    expect(leakedIn(`sig=${w.value}&other`, bySecretPart)).toEqual([w]);
    expect(leakedIn("nothing to see here", bySecretPart)).toEqual([]);
  });

  it("D1 really is read: every table, with the hashes and ciphertexts in it", async () => {
    const dump = await d1Dump();
    const tables = new Set(dump.map((d) => d.table));
    for (const table of [
      "merchants",
      "agents",
      "webhook_endpoints",
      "webhook_deliveries",
      "webhook_attempts",
      "idempotency_keys",
      "audit_events",
      "outbox_events",
      "charges",
      "paylink_grants",
    ]) {
      expect(tables.has(table), table).toBe(true);
    }
    expect(tables.has("d1_migrations")).toBe(false);
    const apiKeyHashes = dump.find((d) => d.table === "merchants" && d.column === "api_key_hash")!.text;
    expect(apiKeyHashes).toContain(await sha256Hex(sampleMerchants[0]!.apiKey));
    const ciphertexts = dump.find((d) => d.table === "webhook_endpoints" && d.column === "secret_ciphertext")!.text;
    expect(ciphertexts.split("\n").filter((c) => c.startsWith("v1:")).length).toBeGreaterThanOrEqual(
      SERVICE_COUNTS.webhook,
    );
  });

  it("no D1 table holds any of the 1,000 keys and secrets issued by the service functions, nor its random part", async () => {
    const problems: string[] = [];
    for (const { table, column, text } of await d1Dump()) {
      const leaks = leakedIn(text, bySecretPart).filter((l) => l.via === "service");
      if (leaks.length > 0) problems.push(describeLeak(`${table}.${column}`, leaks));
    }
    expect(problems).toEqual([]);
  });

  it("no D1 table holds a key or secret the API returned, even to a request with an Idempotency-Key", async () => {
    // The first response of a keyed POST is kept for replay; a response that carries a key or secret must not be kept in plaintext.
    const problems: string[] = [];
    for (const { table, column, text } of await d1Dump()) {
      const leaks = leakedIn(text, bySecretPart).filter((l) => l.via !== "service");
      if (leaks.length > 0) problems.push(describeLeak(`${table}.${column}`, leaks));
    }
    expect(problems).toEqual([]);
  });

  it("merchants.api_key_hash and agents.api_key_hash are the SHA-256 hex of the key", async () => {
    for (const m of sampleMerchants) {
      const row = await env.DB.prepare("SELECT api_key_hash AS hash FROM merchants WHERE id = ?")
        .bind(m.merchantId)
        .first<{ hash: string }>();
      expect(row?.hash).toBe(await sha256Hex(m.apiKey));
      expect(row?.hash).toMatch(/^[0-9a-f]{64}$/);
    }
    for (const a of sampleAgents) {
      const row = await env.DB.prepare("SELECT api_key_hash AS hash FROM agents WHERE id = ?")
        .bind(a.agentId)
        .first<{ hash: string }>();
      expect(row?.hash).toBe(await sha256Hex(a.apiKey));
    }
  });

  it("no Durable Object storage of the wallets, the ledger or a PayLink grant holds a key", async () => {
    const stubs = [
      ...workAgents.map((id) => ({ name: `wallet ${id}`, stub: env.WALLET.getByName(id) as DurableObjectStub })),
      ...sampleAgents
        .slice(0, 2)
        .map((a) => ({ name: `wallet ${a.agentId}`, stub: env.WALLET.getByName(a.agentId) as DurableObjectStub })),
      { name: "ledger", stub: env.LEDGER.getByName("ledger") as DurableObjectStub },
      ...grantIds.map((id) => ({ name: `grant ${id}`, stub: env.GRANT.getByName(id) as DurableObjectStub })),
    ];
    const problems: string[] = [];
    const listed: Record<string, unknown> = {};
    for (const { name, stub } of stubs) {
      const contents = await runInDurableObject(stub, async (_instance, state) => {
        const kv = Object.fromEntries(await state.storage.list());
        const sql: Record<string, unknown[]> = {};
        const tables = state.storage.sql
          .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
          .toArray();
        for (const { name: table } of tables) {
          if (table.startsWith("_cf_") || table.startsWith("sqlite_")) continue;
          sql[table] = state.storage.sql.exec(`SELECT * FROM "${table}"`).toArray();
        }
        return { kv, sql };
      });
      listed[name] = contents;
      const leaks = leakedIn(JSON.stringify(contents), bySecretPart);
      if (leaks.length > 0) problems.push(describeLeak(`Durable Object ${name}`, leaks));
    }
    // The storage really was read: the wallet that holds a payment for approval keeps its agent id for the expiry alarm.
    expect((listed[`wallet ${workAgents[1]}`] as { kv: Record<string, unknown> }).kv).toEqual({
      agentId: workAgents[1],
    });
    expect(problems).toEqual([]);
  });

  it("nothing logged while issuing and using them holds a key or secret", () => {
    const logged = spies
      .map((spy) =>
        spy.mock.calls
          .map((args) => args.map((a) => (typeof a === "string" ? a : (JSON.stringify(a) ?? String(a)))).join(" "))
          .join("\n"),
      )
      .join("\n");
    const leaks = leakedIn(logged, bySecretPart);
    expect(describeLeak("the log", leaks)).toBe("");
  });

  it("the delivered webhook carries a signature, never the signing secret", async () => {
    const deliveries = await waitForReceived(hookName, (list) => list.length > 0);
    const leaks = leakedIn(JSON.stringify(deliveries), bySecretPart);
    expect(describeLeak("the delivered request", leaks)).toBe("");
  });
});
