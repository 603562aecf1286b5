import type { SqlStatement } from "../src/db/statements";
import { auditInserts, sealed } from "../src/ledger/chain";
import { walletPaymentPlan } from "../src/ledger/movements";

/**
 * The runtime floors of `npm run bench` (docs/benchmarks.md) write a batch of
 * the same count and shape as one wallet payment, into scratch copies of the
 * tables a payment touches. The copies are made here at run time, never by a
 * migration, so production has no trace of them; `npm run bench` runs on a
 * throw-away local database anyway.
 */

/** The tables a wallet payment writes or reads in its batch (`walletPaymentPlan` plus the sequencer's audit row). */
export const SCRATCH_TABLES = [
  "charges",
  "checkout_links",
  "approvals",
  "ledger_entries",
  "agents",
  "merchants",
  "outbox_events",
  "audit_events",
] as const;

const PREFIX = "bench_";
const TABLE_NAMES = new RegExp(`\\b(${SCRATCH_TABLES.join("|")})\\b`, "g");

/** The same SQL aimed at the scratch copies (`charges` becomes `bench_charges`); guards keep the real `batch_guards`, which stays empty. */
export const toScratch = (sql: string) => sql.replace(TABLE_NAMES, `${PREFIX}$1`);

/** Charge `i` of the scratch pool (made by `createScratch`). */
export const scratchChargeId = (i: number) => `bench_chg_${i}`;

/**
 * The batch one wallet payment writes: built by the real `walletPaymentPlan`
 * (so it follows any change to the payment's shape) plus the audit row the
 * sequencer appends, aimed at the scratch tables. `i` picks a pending charge of
 * the pool and the audit sequence number, so each call needs its own `i`.
 */
export function paymentShapedBatch(i: number, agentId: string, merchantId: string): SqlStatement[] {
  const paidAt = new Date().toISOString();
  const reference = `PAY_BENCH_${i}`;
  const charge = {
    id: scratchChargeId(i),
    merchantId,
    amountMinor: 1,
    amountBaseUnits: 10_000,
    currency: "USD",
    description: "bench",
    checkoutLinkId: null,
  };
  const plan = walletPaymentPlan({ charge, agentId, method: "ledger", reference, paidAt });
  // The sequencer's own insert; scratch rows are numbered by `i`: no chain is read or hashed, that is the sequencer's own work.
  const audit = auditInserts(
    plan.audit.map((draft, k) => ({
      ...sealed(draft),
      seq: i * 4 + k + 1,
      prevHash: "0".repeat(64),
      hash: "0".repeat(64),
    })),
  );
  return [...plan.statements, ...audit].map((s) => ({ sql: toScratch(s.sql), params: s.params }));
}

interface MasterRow {
  type: string;
  sql: string;
}

/**
 * Creates the scratch tables as copies of the real ones (columns, keys,
 * CHECKs and indexes, read from sqlite_master so they follow the migrations),
 * fills them with the real agents and merchants, and adds `charges` pending
 * charges cloned from charge `templateChargeId`. Idempotent; the pool can grow.
 */
export async function createScratch(
  db: D1Database,
  templateChargeId: string,
  charges: number,
): Promise<{ merchantId: string; agentIds: string[]; pool: number }> {
  const placeholders = SCRATCH_TABLES.map(() => "?").join(", ");
  const master = await db
    .prepare(
      `SELECT type, sql FROM sqlite_master WHERE tbl_name IN (${placeholders}) AND type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC`,
    )
    .bind(...SCRATCH_TABLES)
    .all<MasterRow>();
  // Every mention of a copied table (the name, a CHECK's qualified column, an index's ON) moves to the copy.
  const ddl = master.results.map((row) =>
    toScratch(
      row.type === "table"
        ? row.sql.replace(/^CREATE TABLE\s+/i, "CREATE TABLE IF NOT EXISTS ")
        : row.sql.replace(/^CREATE (UNIQUE )?INDEX\s+[`"]?(\w+)[`"]?/i, `CREATE $1INDEX IF NOT EXISTS \`${PREFIX}$2\``),
    ),
  );
  if (ddl.some((sql) => !sql.includes(PREFIX))) throw new Error("unexpected DDL in sqlite_master");
  await db.batch(ddl.map((sql) => db.prepare(sql)));

  const template = await db
    .prepare("SELECT merchant_id AS merchantId FROM charges WHERE id = ?")
    .bind(templateChargeId)
    .first<{ merchantId: string }>();
  if (!template) throw new Error("template charge not found");
  const columns = (
    await db.prepare("SELECT name FROM pragma_table_info('charges')").all<{ name: string }>()
  ).results.map((c) => c.name);
  // Every pool charge is the template, pending and unpaid, with its own id (D1 binds numbers as REAL, hence the CAST).
  const fresh: Record<string, string> = {
    id: `'bench_chg_' || n.i`,
    status: `'pending'`,
    amount_minor: "1",
    agent_id: "NULL",
    method: "NULL",
    reference: "NULL",
    paid_at: "NULL",
    x402_claim: "NULL",
    checkout_link_id: "NULL",
    paylink_grant_id: "NULL",
  };
  const select = columns.map((c) => fresh[c] ?? `t.\`${c}\``).join(", ");
  const have = (await db.prepare(`SELECT COUNT(*) AS n FROM ${PREFIX}charges`).first<{ n: number }>())?.n ?? 0;
  await db.batch([
    db.prepare(`INSERT OR IGNORE INTO ${PREFIX}merchants SELECT * FROM merchants`),
    db.prepare(`INSERT OR IGNORE INTO ${PREFIX}agents SELECT * FROM agents`),
    ...(charges > have
      ? [
          db
            .prepare(
              `INSERT INTO ${PREFIX}charges (${columns.map((c) => `\`${c}\``).join(", ")})
               WITH RECURSIVE n(i) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
               SELECT ${select} FROM n, (SELECT * FROM charges WHERE id = ?) t`,
            )
            .bind(have, charges, templateChargeId),
        ]
      : []),
  ]);
  // The agents whose money is in this database: with ledger shards, an agent homed on another shard
  // has its balance there, and its row here would fail the batch's balance guard.
  const agents = await db
    .prepare(`SELECT id FROM ${PREFIX}agents WHERE balance_minor > 0 ORDER BY created_at, id`)
    .all<{ id: string }>();
  return { merchantId: template.merchantId, agentIds: agents.results.map((a) => a.id), pool: Math.max(have, charges) };
}

/** Drops the scratch tables (their indexes go with them). */
export async function dropScratch(db: D1Database): Promise<void> {
  await db.batch(SCRATCH_TABLES.map((t) => db.prepare(`DROP TABLE IF EXISTS ${PREFIX}${t}`)));
}
