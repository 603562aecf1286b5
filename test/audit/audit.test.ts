import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { csvField } from "../../src/audit/csv";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, creditAgent, payCharge } from "../helpers/factories";
import { paidBelowACent } from "../helpers/sub-cent";

interface DbAuditRow {
  seq: number;
  type: string;
  reference: string | null;
  chargeId: string | null;
  agentId: string | null;
  merchantId: string | null;
  amountMinor: number;
  amountBaseUnits: string | null;
  currency: string;
  data: string;
  createdAt: string;
  prevHash: string;
  hash: string;
}

const GENESIS = "0".repeat(64);
const CSV_HEADER = [
  "seq",
  "createdAt",
  "type",
  "reference",
  "chargeId",
  "agentId",
  "merchantId",
  "amountMinor",
  "currency",
  "data",
  "prevHash",
  "hash",
  "amountBaseUnits",
];

async function auditTable(): Promise<DbAuditRow[]> {
  const { results } = await env.DB.prepare(
    `SELECT seq, type, reference, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId, amount_minor AS amountMinor, amount_base_units AS amountBaseUnits,
            currency, data, created_at AS createdAt, prev_hash AS prevHash, hash FROM audit_events ORDER BY seq`,
  ).all<DbAuditRow>();
  return results;
}

/** By default from the last verified point; `full` from genesis (test/audit/verification.test.ts tells them apart). */
const verify = async (full = false) => {
  const res = await api("GET", `/console/audit/verify${full ? "?full=true" : ""}`, { token: await consoleToken() });
  expect(res.status).toBe(200);
  return res.body;
};

/** RFC 4180 parser: quoted fields, doubled quotes, CRLF records. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let field = "";
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      record.push(field);
      field = "";
    } else if (ch === "\r" && text[i + 1] === "\n") {
      record.push(field);
      records.push(record);
      record = [];
      field = "";
      i++;
    } else field += ch;
  }
  if (field !== "" || record.length > 0) {
    record.push(field);
    records.push(record);
  }
  return records;
}

const exportCsv = async (query = "") => api("GET", `/export/transactions.csv${query}`, { token: await consoleToken() });
const day = (offsetDays = 0) => new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

let fixture: { merchants: { merchantId: string; apiKey: string }[]; agents: { agentId: string; apiKey: string }[] };

beforeAll(async () => {
  // A few credits and payments, including a granted approval, to populate the chain and the ledger.
  const m1 = await createMerchant({ name: "Audit One, Inc." });
  const m2 = await createMerchant({ name: 'Audit "Two"' });
  const a1 = await createAgent({ credit: 5000 });
  const a2 = await createAgent({ credit: 3000, policy: { approvalThresholdUsdCents: 500 } });
  await creditAgent(a1.agentId, 250);
  for (const [agent, merchant, amount] of [
    [a1, m1, 1200],
    [a1, m2, 300],
    [a2, m1, 400],
    [a2, m2, 500],
  ] as const) {
    const charge = await createCharge(merchant.apiKey, amount, { description: `item, "${amount}"` });
    const res = await payCharge(agent.apiKey, charge.chargeId);
    if (res.status !== 200) throw new Error(`fixture payment failed: ${res.status} ${res.text}`);
  }
  const heldCharge = await createCharge(m2.apiKey, 900, { description: "=SUM(A1)" });
  const hold = await payCharge(a2.apiKey, heldCharge.chargeId);
  if (hold.status !== 402) throw new Error("expected a hold");
  const granted = await api("POST", `/approvals/${hold.body.approvalId}/grant`, { token: await consoleToken() });
  if (granted.status !== 200) throw new Error(`grant failed: ${granted.status} ${granted.text}`);
  // A pending charge that is never paid must not show in balances.
  await createCharge(m1.apiKey, 777);
  fixture = { merchants: [m1, m2], agents: [a1, a2] };
});

describe("audit chain", () => {
  it("verify is ok and its head is the last row of the table", async () => {
    const rows = await auditTable();
    expect(rows.length).toBeGreaterThanOrEqual(8); // 2 credits + 1 top-up + 5 payments
    const result = await verify();
    expect(result.ok).toBe(true);
    expect(result.rows).toBe(rows.length);
    expect(result.headSeq).toBe(rows.length);
    expect(result.headHash).toBe(rows.at(-1)!.hash);
    const count = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events").first<{ n: number }>();
    expect(result.headSeq).toBe(count!.n);
  });

  it("seq is gap-free from 1", async () => {
    const rows = await auditTable();
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
  });

  it("each row's prevHash is the previous row's hash, starting from genesis", async () => {
    const rows = await auditTable();
    expect(rows[0]!.prevHash).toBe(GENESIS);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.prevHash, `seq ${rows[i]!.seq}`).toBe(rows[i - 1]!.hash);
    for (const r of rows) expect(r.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(rows.map((r) => r.hash)).size).toBe(rows.length);
  });

  it("records every credit and payment of the fixture", async () => {
    const rows = await auditTable();
    const [a1, a2] = fixture.agents;
    expect(
      rows.filter((r) => r.agentId === a1!.agentId && r.type === "agent.credited").map((r) => r.amountMinor),
    ).toEqual([5000, 250]);
    expect(rows.filter((r) => r.agentId === a1!.agentId && r.type === "charge.paid").map((r) => r.amountMinor)).toEqual(
      [1200, 300],
    );
    expect(rows.filter((r) => r.agentId === a2!.agentId && r.type === "charge.paid").map((r) => r.amountMinor)).toEqual(
      [400, 500, 900],
    );
    for (const r of rows.filter((r) => r.type === "charge.paid")) expect(r.reference).toMatch(/^PAY_/);
  });

  it("the chain keeps growing consistently after more activity", async () => {
    const before = await verify();
    const [a1] = fixture.agents;
    await creditAgent(a1!.agentId, 1);
    const after = await verify();
    expect(after.ok).toBe(true);
    expect(after.headSeq).toBe(before.headSeq + 1);
    const last = (await auditTable()).at(-1)!;
    expect(last.prevHash).toBe(before.headHash);
    expect(last.type).toBe("agent.credited");
  });
});

describe("CSV export", () => {
  it("a cell that a spreadsheet would run as a formula starts with an apostrophe; user text only ever sits inside the data JSON", async () => {
    for (const formula of ["=SUM(A1)", "+1", "-1+2", "@cmd", "\t=1"]) expect(csvField(formula)).toBe(`'${formula}`);
    expect(csvField('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvField(-5)).toBe("-5"); // amounts are numbers, not text: never prefixed
    // A description a merchant typed as a formula reaches the export inside the data cell, which starts with "{".
    const records = parseCsv((await exportCsv()).text);
    const data = CSV_HEADER.indexOf("data");
    const cell = records.find((r) => r[data]?.includes("=SUM(A1)"));
    expect(cell, "the =SUM(A1) charge's row").toBeDefined();
    expect(cell![data]!.startsWith("{")).toBe(true);
  });

  it("text/csv with the header row and one row per audit event (default range includes today)", async () => {
    const res = await exportCsv();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
    const records = parseCsv(res.text);
    expect(records[0]).toEqual(CSV_HEADER);
    const rows = await auditTable();
    const body = records.slice(1);
    expect(body).toHaveLength(rows.length);
    for (const [i, rec] of body.entries()) {
      expect(rec).toHaveLength(CSV_HEADER.length);
      const db = rows[i]!;
      const get = (col: string) => rec[CSV_HEADER.indexOf(col)];
      expect(Number(get("seq"))).toBe(db.seq);
      expect(get("hash")).toBe(db.hash);
      expect(get("prevHash")).toBe(db.prevHash);
      expect(get("type")).toBe(db.type);
      expect(get("createdAt")).toBe(db.createdAt);
      expect(Number(get("amountMinor"))).toBe(db.amountMinor);
      // The exact amount: the row's, or its cents x 10,000 on a row from before amounts below a cent.
      expect(get("amountBaseUnits")).toBe(db.amountBaseUnits ?? String(BigInt(db.amountMinor) * 10_000n));
      expect(get("currency")).toBe(db.currency);
      expect(get("reference")).toBe(db.reference ?? "");
      expect(get("chargeId")).toBe(db.chargeId ?? "");
      expect(get("agentId")).toBe(db.agentId ?? "");
      expect(get("merchantId")).toBe(db.merchantId ?? "");
      expect(JSON.parse(get("data")!)).toEqual(JSON.parse(db.data));
    }
  });

  it("a payment below a cent: amountMinor empty, amountBaseUnits exact, the chain still verifying", async () => {
    const merchant = await createMerchant({ name: "Audit Sub-cent" });
    const tenth = await paidBelowACent(merchant.merchantId, 1_000n); // $0.001
    const more = await paidBelowACent(merchant.merchantId, 12_345n); // $0.012345: a cent and more
    const whole = await paidBelowACent(merchant.merchantId, 30_000n); // $0.03, paid in base units
    const records = parseCsv((await exportCsv()).text);
    const col = (name: string) => CSV_HEADER.indexOf(name);
    expect(records[0]!.at(-1)).toBe("amountBaseUnits");
    const paidRow = (chargeId: string) =>
      records.find((r) => r[col("chargeId")] === chargeId && r[col("type")] === "charge.paid")!;
    for (const [chargeId, cents, units] of [
      [tenth, "", "1000"],
      [more, "", "12345"],
      [whole, "3", "30000"],
    ] as const) {
      const row = paidRow(chargeId);
      expect(row, chargeId).toHaveLength(CSV_HEADER.length);
      expect(row[col("amountMinor")]).toBe(cents);
      expect(row[col("amountBaseUnits")]).toBe(units);
      expect(row[col("merchantId")]).toBe(merchant.merchantId);
      const stored = (await auditTable()).find((r) => r.chargeId === chargeId && r.type === "charge.paid")!;
      expect(row[col("hash")]).toBe(stored.hash);
      expect(stored.amountBaseUnits).toBe(units);
    }
    expect((await verify(true)).ok).toBe(true);
  });

  it("a range to the last day there is (9999-12-31) holds today's rows", async () => {
    const all = parseCsv((await exportCsv("?from=2020-01-01&to=9999-12-31")).text);
    const today = parseCsv((await exportCsv(`?from=${day()}&to=${day()}`)).text);
    expect(today.length).toBeGreaterThan(1);
    expect(all.length).toBeGreaterThanOrEqual(today.length);
  });

  it("an explicit range of today returns the same rows as the default", async () => {
    const today = day();
    const explicit = parseCsv((await exportCsv(`?from=${today}&to=${today}`)).text);
    const dflt = parseCsv((await exportCsv()).text);
    expect(explicit.length).toBeGreaterThan(1);
    expect(explicit).toEqual(dflt);
  });

  it("a range in the past excludes today's rows", async () => {
    for (const query of ["?from=2020-01-01&to=2020-12-31", `?from=${day(-40)}&to=${day(-1)}`, `?to=${day(-1)}`]) {
      const res = await exportCsv(query);
      expect(res.status, query).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/csv/);
      expect(parseCsv(res.text), query).toEqual([CSV_HEADER]);
    }
  });

  it("a range in the future excludes today's rows", async () => {
    const res = await exportCsv(`?from=${day(2)}&to=${day(3)}`);
    expect(res.status).toBe(200);
    expect(parseCsv(res.text)).toEqual([CSV_HEADER]);
  });

  it.each([
    ["month 13", "?from=2024-13-01"],
    ["not a date", "?from=abc"],
    ["not a calendar date", "?to=2024-02-30"],
    ["wrong format", "?from=2024-1-5"],
    ["from after to", "?from=2025-02-02&to=2025-02-01"],
  ])("400 invalid_request for %s", async (_label, query) => {
    const res = await exportCsv(query);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });

  it("needs a console session", async () => {
    const none = await api("GET", "/export/transactions.csv");
    expect(none.status).toBe(401);
    const merchant = fixture.merchants[0]!;
    const wrong = await api("GET", "/export/transactions.csv", { token: merchant.apiKey });
    expect(wrong.status).toBe(403);
  });
});

describe("ledger invariants", () => {
  it("ledger entries sum to zero, exactly (in base units) and in their derived cents", async () => {
    const row = await env.DB.prepare(
      "SELECT COALESCE(SUM(amount_base_units), 0) AS s, COALESCE(SUM(amount_minor), 0) AS c, COUNT(*) AS n FROM ledger_entries",
    ).first<{ s: number; c: number; n: number }>();
    expect(row!.n).toBeGreaterThan(0);
    expect(row!.s).toBe(0);
    expect(row!.c).toBe(0);
    const perTransfer = await env.DB.prepare(
      "SELECT transfer_id, SUM(amount_base_units) AS s FROM ledger_entries GROUP BY transfer_id HAVING s != 0",
    ).all();
    expect(perTransfer.results).toEqual([]);
  });

  it("every agent's balance equals the sum of its ledger entries", async () => {
    const { results } = await env.DB.prepare(
      `SELECT a.id, a.balance_minor AS balance,
              (SELECT COALESCE(SUM(e.amount_minor), 0) FROM ledger_entries e WHERE e.account = 'agent:' || a.id) AS ledger
       FROM agents a`,
    ).all<{ id: string; balance: number; ledger: number }>();
    expect(results.length).toBeGreaterThanOrEqual(2);
    for (const r of results) expect(r.balance, r.id).toBe(r.ledger);
    const [a1, a2] = fixture.agents;
    expect(results.find((r) => r.id === a1!.agentId)!.balance).toBe(5000 + 250 + 1 - 1200 - 300);
    expect(results.find((r) => r.id === a2!.agentId)!.balance).toBe(3000 - 400 - 500 - 900);
  });

  it("every merchant's balance equals the sum of its ledger entries and of its paid charges", async () => {
    const { results } = await env.DB.prepare(
      `SELECT m.id, m.balance_minor AS balance,
              (SELECT COALESCE(SUM(e.amount_minor), 0) FROM ledger_entries e WHERE e.account = 'merchant:' || m.id) AS ledger,
              (SELECT COALESCE(SUM(c.amount_minor), 0) FROM charges c WHERE c.merchant_id = m.id AND c.status = 'paid') AS paid
       FROM merchants m`,
    ).all<{ id: string; balance: number; ledger: number; paid: number }>();
    expect(results.length).toBeGreaterThanOrEqual(2);
    for (const r of results) {
      expect(r.balance, r.id).toBe(r.ledger);
      expect(r.balance, r.id).toBe(r.paid);
    }
    const [m1, m2] = fixture.merchants;
    expect(results.find((r) => r.id === m1!.merchantId)!.balance).toBe(1200 + 400);
    expect(results.find((r) => r.id === m2!.merchantId)!.balance).toBe(300 + 500 + 900);
  });

  it("only agent, merchant and external accounts exist", async () => {
    const { results } = await env.DB.prepare("SELECT DISTINCT account FROM ledger_entries").all<{ account: string }>();
    for (const r of results) expect(r.account).toMatch(/^(agent:agent_|merchant:mch_|external:)/);
  });
});

// Tampering runs last and restores the row, so the chain is whole again afterwards. Earlier verifications
// remembered the head, so a row before it is checked by a full verification.
describe("tamper detection", () => {
  it("changing an amount breaks verify at exactly that seq (hash_mismatch), and restoring it heals the chain", async () => {
    const rows = await auditTable();
    const target = rows[Math.floor(rows.length / 2)]!;
    await env.DB.prepare("UPDATE audit_events SET amount_minor = amount_minor + 1 WHERE seq = ?")
      .bind(target.seq)
      .run();
    try {
      const broken = await verify(true);
      expect(broken.ok).toBe(false);
      expect(broken.brokenSeq).toBe(target.seq);
      expect(broken.problem).toBe("hash_mismatch");
    } finally {
      await env.DB.prepare("UPDATE audit_events SET amount_minor = ? WHERE seq = ?")
        .bind(target.amountMinor, target.seq)
        .run();
    }
    const healed = await verify(true);
    expect(healed.ok).toBe(true);
    expect(healed.headSeq).toBe(rows.length);
  });

  it("changing the data of the first row is detected at seq 1", async () => {
    const first = (await auditTable())[0]!;
    const forged = JSON.stringify({ ...JSON.parse(first.data), by: "mallory@example.com" });
    await env.DB.prepare("UPDATE audit_events SET data = ? WHERE seq = 1").bind(forged).run();
    try {
      const broken = await verify(true);
      expect(broken).toMatchObject({ ok: false, brokenSeq: 1, problem: "hash_mismatch" });
    } finally {
      await env.DB.prepare("UPDATE audit_events SET data = ? WHERE seq = 1").bind(first.data).run();
    }
    expect((await verify(true)).ok).toBe(true);
  });

  // The last row is the remembered point: the default verification checks it as a full one would.
  it("a rewritten prevHash link is detected as prev_hash_mismatch", async () => {
    const rows = await auditTable();
    const target = rows.at(-1)!;
    await env.DB.prepare("UPDATE audit_events SET prev_hash = ? WHERE seq = ?").bind("f".repeat(64), target.seq).run();
    try {
      const broken = await verify();
      expect(broken).toMatchObject({ ok: false, brokenSeq: target.seq, problem: "prev_hash_mismatch" });
    } finally {
      await env.DB.prepare("UPDATE audit_events SET prev_hash = ? WHERE seq = ?")
        .bind(target.prevHash, target.seq)
        .run();
    }
    expect((await verify()).ok).toBe(true);
  });
});
