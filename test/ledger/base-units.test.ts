import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { chargeCreationStatements, newPendingCharge } from "../../src/charges/service";
import { executeBatch } from "../../src/db/statements";
import { type Place, placementOf } from "../../src/ledger/place";
import { type Account, type Posting, postingStatements } from "../../src/ledger/postings";
import { newId } from "../../src/lib/ids";
import { createAgent, createMerchant } from "../helpers/factories";

/*
 * The ledger holds money to the token's base unit (1 cent = 10,000); every cents column beside a
 * base-unit one is its whole cents, and the tables' triggers refuse any write that lets them disagree.
 */

/** A merchant and where its rows and money live. */
async function merchantAt(name: string): Promise<{ id: string; account: Account; home: Place }> {
  const { merchantId } = await createMerchant({ name });
  return { id: merchantId, account: `merchant:${merchantId}`, home: await placementOf(env).ofMerchant(merchantId) };
}

/** Commits postings as one transfer through the ledger of `home`. */
async function post(home: Place, ...postings: Posting[]) {
  const transferId = newId("payment", home);
  const result = await home.commit({
    statements: postingStatements(transferId, postings, new Date().toISOString()),
    audit: [],
  });
  expect(result.kind).toBe("committed");
  return transferId;
}

/** A balance row's cents and base units, the base units as text so they are read exactly. */
const balanceOf = async (home: Place, table: "merchants" | "agents", id: string) =>
  (await home.db
    .prepare(`SELECT balance_minor AS minor, CAST(balance_base_units AS TEXT) AS baseUnits FROM ${table} WHERE id = ?`)
    .bind(id)
    .first<{ minor: number; baseUnits: string }>())!;

/** The message a refused write fails with. */
async function refusal(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    return String(error);
  }
  return "written";
}

describe("amounts in base units", () => {
  it("postings below a cent keep each balance's cents at the whole cents of its base units", async () => {
    const a = await merchantAt("Base Units A");
    const b = await merchantAt("Base Units B");
    const steps: [Posting, { a: [number, string]; b: [number, string] }][] = [
      [
        { from: "external:test", to: a.account, amountBaseUnits: 9_999n },
        { a: [0, "9999"], b: [0, "0"] },
      ],
      // One more base unit makes the cent.
      [
        { from: "external:test", to: a.account, amountBaseUnits: 1n },
        { a: [1, "10000"], b: [0, "0"] },
      ],
      [
        { from: a.account, to: b.account, amountBaseUnits: 5_001n },
        { a: [0, "4999"], b: [0, "5001"] },
      ],
      [
        { from: "external:test", to: b.account, amountBaseUnits: 24_999n },
        { a: [0, "4999"], b: [3, "30000"] },
      ],
      [
        { from: b.account, to: a.account, amountBaseUnits: 15_001n },
        { a: [2, "20000"], b: [1, "14999"] },
      ],
    ];
    for (const [posting, expected] of steps) {
      const transferId = await post(a.home, posting);
      const money = { a: await balanceOf(a.home, "merchants", a.id), b: await balanceOf(b.home, "merchants", b.id) };
      expect({ a: [money.a.minor, money.a.baseUnits], b: [money.b.minor, money.b.baseUnits] }).toEqual(expected);
      // The entries sum to zero in base units and state their cents truncated toward zero.
      const entries = await a.home.db
        .prepare(
          "SELECT amount_minor AS minor, amount_base_units AS baseUnits FROM ledger_entries WHERE transfer_id = ? ORDER BY amount_base_units",
        )
        .bind(transferId)
        .all<{ minor: number; baseUnits: number }>();
      const amount = Number(posting.amountBaseUnits);
      const cents = Math.trunc(amount / 10_000);
      expect(entries.results).toEqual([
        { minor: cents === 0 ? 0 : -cents, baseUnits: -amount },
        { minor: cents, baseUnits: amount },
      ]);
    }
    // Each balance is its ledger, to the base unit.
    for (const m of [a, b]) {
      const sum = await m.home.db
        .prepare("SELECT CAST(COALESCE(SUM(amount_base_units), 0) AS TEXT) AS v FROM ledger_entries WHERE account = ?")
        .bind(m.account)
        .first<{ v: string }>();
      expect(sum!.v).toBe((await balanceOf(m.home, "merchants", m.id)).baseUnits);
    }
  });

  it("a balance's cents written alone are refused, for merchants and agents", async () => {
    const m = await merchantAt("Base Units Cents Alone");
    await post(m.home, { from: "external:test", to: m.account, amountBaseUnits: 15_000n });
    const agent = await createAgent({ name: "base units cents alone", credit: 3 });
    const agentHome = await placementOf(env).ofAgent(agent.agentId);
    for (const [home, table, id, before] of [
      [m.home, "merchants", m.id, { minor: 1, baseUnits: "15000" }],
      [agentHome, "agents", agent.agentId, { minor: 3, baseUnits: "30000" }],
    ] as const) {
      expect(await balanceOf(home, table, id)).toEqual(before);
      for (const sql of [
        `UPDATE ${table} SET balance_minor = balance_minor + 1 WHERE id = ?`,
        // Base units moved without their cents (a whole cent more) are refused the same way.
        `UPDATE ${table} SET balance_base_units = balance_base_units + 10000 WHERE id = ?`,
      ])
        expect(await refusal(() => home.db.prepare(sql).bind(id).run()), sql).toMatch(/balance_cents_not_derived/);
      expect(await balanceOf(home, table, id)).toEqual(before);
    }
  });

  it("a ledger entry whose cents are not the whole cents of its base units is refused", async () => {
    const { home, account } = await merchantAt("Base Units Entry");
    const insert = (minor: number, baseUnits: number) =>
      home.db
        .prepare(
          "INSERT INTO ledger_entries (transfer_id, account, amount_minor, amount_base_units, created_at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(newId("payment", home), account, minor, baseUnits, new Date().toISOString())
        .run();
    // Cents are truncated toward zero: -9,999 base units is 0 cents, not -1; 19,999 is 1, not 2.
    for (const [minor, baseUnits] of [
      [1, 9_999],
      [-1, -9_999],
      [2, 19_999],
      [0, 10_000],
    ])
      expect(await refusal(() => insert(minor!, baseUnits!)), `${minor} / ${baseUnits}`).toMatch(
        /amount_cents_not_derived/,
      );
    const rows = await home.db
      .prepare("SELECT COUNT(*) AS n FROM ledger_entries WHERE account = ?")
      .bind(account)
      .first<{ n: number }>();
    expect(rows!.n).toBe(0);
  });

  it("a charge whose cents are not the whole cents of its amount is refused; one that is, below a cent, is written", async () => {
    const m = await merchantAt("Base Units Charge");
    const charge = (baseUnits: bigint) => newPendingCharge(m.home, m.id, { amountBaseUnits: baseUnits });
    const write = (row: ReturnType<typeof charge>) => executeBatch(m.home.db, chargeCreationStatements(row, "shop"));
    const wrong = [
      { ...charge(15_000n), amountMinor: 2 },
      { ...charge(9_999n), amountMinor: 1 },
    ];
    for (const row of wrong)
      expect(await refusal(() => write(row)), `${row.amountMinor} / ${row.amountBaseUnits}`).toMatch(
        /amount_cents_not_derived/,
      );
    const right = charge(15_000n);
    await write(right);
    const rows = await m.home.db
      .prepare(
        "SELECT id, amount_minor AS minor, CAST(amount_base_units AS TEXT) AS baseUnits FROM charges WHERE merchant_id = ?",
      )
      .bind(m.id)
      .all();
    expect(rows.results).toEqual([{ id: right.id, minor: 1, baseUnits: "15000" }]);
    // The refused writes left no event behind either: each batch is all or nothing.
    const events = await m.home.db
      .prepare(
        "SELECT COUNT(*) AS n FROM outbox_events WHERE type = 'charge.created' AND json_extract(data, '$.merchantId') = ?",
      )
      .bind(m.id)
      .first<{ n: number }>();
    expect(events!.n).toBe(1);
  });
});
