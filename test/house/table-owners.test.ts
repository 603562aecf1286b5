import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  EVERYWHERE,
  OWNERS,
  tablesOf,
  tableUses,
  tableViolations,
  violationsByFile,
} from "../../scripts/house/table-owners.mjs";

// Each table's SQL stays with its owner, src/db and src/ledger (#38; scripts/house/table-owners.mjs).

const repo = path.resolve(import.meta.dirname, "../..");

/**
 * Files that still use another folder's tables, and which: the moves left to do. The test fails when
 * new code adds a use AND when a move is done but this list still names it, so the list only shrinks,
 * to empty.
 */
const STILL_TO_MOVE: Record<string, string[]> = {};

/** A small tree: three tables (one renamed into place by a migration), their owners and a few users. */
const FIXTURE: Record<string, string> = {
  "migrations/0000_init.sql": [
    "CREATE TABLE `charges` (`id` text PRIMARY KEY NOT NULL, `status` text NOT NULL);",
    "CREATE TABLE `merchants` (`id` text PRIMARY KEY NOT NULL, `api_key_hash` text NOT NULL);",
    "CREATE TABLE `agents` (`id` text PRIMARY KEY NOT NULL, `api_key_hash` text NOT NULL);",
    "CREATE TABLE `outbox_events` (`id` text PRIMARY KEY NOT NULL);",
  ].join("\n"),
  "migrations/0001_rebuild.sql": [
    "CREATE TABLE `__new_charges` (`id` text PRIMARY KEY NOT NULL, `status` text NOT NULL);",
    "INSERT INTO `__new_charges` SELECT * FROM `charges`;",
    "DROP TABLE `charges`;",
    "ALTER TABLE `__new_charges` RENAME TO `charges`;",
  ].join("\n"),
  "src/db/charges.ts": 'export const charges = sqliteTable("charges", { id: text("id") });\n',
  "src/db/merchants.ts": [
    'export const merchants = sqliteTable("merchants", { id: text("id") });',
    'export const agents = sqliteTable("agents", { id: text("id") });',
  ].join("\n"),
  "src/db/schema.ts": 'export * from "./charges";\nexport * from "./merchants";\n',
  // The owner's own SQL and drizzle queries: no violation.
  "src/charges/service.ts": [
    'import { charges } from "../db/schema";',
    "export const pending = \"SELECT id FROM charges WHERE status = 'pending'\";",
    "export const list = (db: any) => db.select().from(charges).all();",
    "export const paid = (db: any, id: string) => db.update(charges).set({ status: 'paid' }).where(id);",
  ].join("\n"),
  // The ledger and src/db may touch every table.
  "src/ledger/movements.ts":
    'export const credit = "UPDATE merchants SET balance_minor = balance_minor + ? WHERE id = ?";\n',
  // A domain writing another's table in SQL; comments and `import type` do not count.
  "src/refunds/plans.ts": [
    'import type { charges } from "../db/charges";',
    "// UPDATE charges SET refunded_minor = ... is what this must not do.",
    "export type Row = typeof charges.$inferSelect;",
    "export const refunded = sqlStatement(",
    '  "UPDATE charges SET refunded_minor = refunded_minor + ? WHERE id = ?",',
    ");",
    "export const stillPaid = `EXISTS (SELECT 1",
    "  FROM charges WHERE id = ? AND status = 'paid')`;",
  ].join("\n"),
  // Drizzle outside the owner: the import, `.from`, `.innerJoin` and `db.query`.
  "src/x402/lookup.ts": [
    'import { charges, merchants as m } from "../db/schema";',
    "export const one = (db: any, id: string) => db.select().from(charges).where(id).get();",
    "export const named = (db: any) => db.select().from(charges).innerJoin(m, undefined).all();",
    "export const found = (db: any) => db.query.charges.findFirst();",
    "export const kept = (ids: string[]) => Array.from(ids);",
  ].join("\n"),
  // Tables named through a constant, a choice and a helper that takes the name.
  "src/keys/roll.ts": [
    'const TABLE = { agent: "agents", merchant: "merchants" } as const;',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a fixture's file
    'export const roll = (kind: "agent" | "merchant") => `update ${ TABLE[kind] } set api_key_hash = ? where id = ?`;',
  ].join("\n"),
  "src/auth/credentials.ts": [
    'import { agents, merchants } from "../db/merchants";',
    'export const holder = (db: any, kind: string) => { const table = kind === "merchant" ? merchants : agents; return db.select().from(table).get(); };',
  ].join("\n"),
  "src/jobs/retention.ts":
    'export const steps = (db: any) => [pagedDelete(db, "outbox", "outbox_events", "dispatched_at < ?")];\n',
  // Prose is not SQL, and names that are not tables are nothing.
  "src/openapi/document.ts": [
    'export const about = "Merchants collect from agents that pay from a wallet.";',
    'export const other = "SELECT 1 FROM pragma_table_info WHERE name = ?";',
  ].join("\n"),
};

function writeTree(dir: string, files: Record<string, string>) {
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
}

describe("the table-owners scanner", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "table-owners-"));
    writeTree(dir, FIXTURE);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads the tables the migrations leave standing and the drizzle tables of src/db", () => {
    const { migrations, drizzle } = tablesOf(dir);
    expect(migrations).toEqual(["agents", "charges", "merchants", "outbox_events"]);
    expect(Object.fromEntries(drizzle)).toEqual({ charges: "charges", merchants: "merchants", agents: "agents" });
  });

  it("names each use of a table outside its owner, with its line and kind", () => {
    expect(tableViolations(dir)).toEqual([
      { file: "src/auth/credentials.ts", table: "agents", line: 1, kind: "drizzle-import" },
      { file: "src/auth/credentials.ts", table: "merchants", line: 1, kind: "drizzle-import" },
      { file: "src/auth/credentials.ts", table: "agents", line: 2, kind: "drizzle-from" },
      { file: "src/auth/credentials.ts", table: "merchants", line: 2, kind: "drizzle-from" },
      { file: "src/jobs/retention.ts", table: "outbox_events", line: 1, kind: "sql-helper" },
      { file: "src/keys/roll.ts", table: "agents", line: 2, kind: "sql" },
      { file: "src/keys/roll.ts", table: "merchants", line: 2, kind: "sql" },
      { file: "src/refunds/plans.ts", table: "charges", line: 5, kind: "sql" },
      { file: "src/refunds/plans.ts", table: "charges", line: 8, kind: "sql" },
      { file: "src/x402/lookup.ts", table: "charges", line: 1, kind: "drizzle-import" },
      { file: "src/x402/lookup.ts", table: "merchants", line: 1, kind: "drizzle-import" },
      { file: "src/x402/lookup.ts", table: "charges", line: 2, kind: "drizzle-from" },
      { file: "src/x402/lookup.ts", table: "charges", line: 3, kind: "drizzle-from" },
      { file: "src/x402/lookup.ts", table: "merchants", line: 3, kind: "drizzle-join" },
      { file: "src/x402/lookup.ts", table: "charges", line: 4, kind: "drizzle-query" },
    ]);
  });

  it("sees the owner's and the ledger's own uses, and lets them be", () => {
    const own = tableUses(dir).filter(
      (u) => u.file === "src/charges/service.ts" || u.file === "src/ledger/movements.ts",
    );
    expect(own.map((u) => `${u.file}:${u.line} ${u.table} ${u.kind}`)).toEqual([
      "src/charges/service.ts:1 charges drizzle-import",
      "src/charges/service.ts:2 charges sql",
      "src/charges/service.ts:3 charges drizzle-from",
      "src/charges/service.ts:4 charges drizzle-update",
      "src/ledger/movements.ts:1 merchants sql",
    ]);
  });

  it("groups violations by file, as STILL_TO_MOVE keeps them", () => {
    expect(violationsByFile(tableViolations(dir))).toEqual({
      "src/auth/credentials.ts": ["agents", "merchants"],
      "src/jobs/retention.ts": ["outbox_events"],
      "src/keys/roll.ts": ["agents", "merchants"],
      "src/refunds/plans.ts": ["charges"],
      "src/x402/lookup.ts": ["charges", "merchants"],
    });
  });
});

describe("the service's tables", () => {
  it("each have one owner, a folder of src/", { timeout: 60_000 }, () => {
    const { migrations, drizzle } = tablesOf(repo);
    const tables = [...new Set([...migrations, ...drizzle.values()])].sort();
    expect(Object.keys(OWNERS).sort()).toEqual(tables);
    const folders = readdirSync(path.join(repo, "src")).filter((f) =>
      statSync(path.join(repo, "src", f)).isDirectory(),
    );
    for (const owner of [...Object.values(OWNERS).flat(), ...EVERYWHERE]) expect(folders).toContain(owner);
  });

  // Parsing every file of src/ takes seconds on a busy machine.
  it("are used outside their owner, src/db and src/ledger only where STILL_TO_MOVE says", { timeout: 60_000 }, () => {
    expect(violationsByFile(tableViolations(repo))).toEqual(STILL_TO_MOVE);
  });
});
