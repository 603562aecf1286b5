import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * Double-entry rows: each transfer writes one row per account it touches and
 * the rows of a transfer sum to zero. Rows are never updated or deleted; a
 * correction is a new transfer.
 */
export const ledgerEntries = sqliteTable(
  "ledger_entries",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    transferId: text("transfer_id").notNull(),
    /** `agent:<id>`, `merchant:<id>` or `external:<source>`. */
    account: text("account").notNull(),
    /** The signed amount in whole cents, truncated toward zero: always `amount_base_units / 10000` (a trigger holds it so). */
    amountMinor: integer("amount_minor").notNull(),
    /** Signed token base units (1 cent = 10,000), exact: positive credits the account, negative debits it. What sums to zero. */
    amountBaseUnits: integer("amount_base_units").notNull().default(0),
    createdAt: text("created_at").notNull(),
  },
  // No index by account: nothing reads an account's entries but a check of balances against them
  // (tests, an operator's query), and one would cost two index rows per payment.
  (t) => [index("ledger_entries_transfer").on(t.transferId)],
);

/** The tamper-evident audit chain: gap-free `seq`, each row hashing its predecessor. */
export const auditEvents = sqliteTable(
  "audit_events",
  {
    seq: integer("seq").primaryKey(),
    type: text("type").notNull(),
    reference: text("reference"),
    chargeId: text("charge_id"),
    agentId: text("agent_id"),
    merchantId: text("merchant_id"),
    amountMinor: integer("amount_minor").notNull(),
    /** The exact amount in base units (decimal string); null on rows written before amounts below a cent existed. */
    amountBaseUnits: text("amount_base_units"),
    currency: text("currency").notNull(),
    /** Canonical JSON of the event's details. */
    data: text("data").notNull(),
    createdAt: text("created_at").notNull(),
    prevHash: text("prev_hash").notNull(),
    hash: text("hash").notNull(),
  },
  (t) => [
    index("audit_events_created").on(t.createdAt),
    // A receipt names the audit row of its payment: found by charge, or by payout or refund id. The
    // latter two are partial, one per type the receipts look up (a query's `type = '...'` is what lets
    // SQLite use a partial index), so a payment's row is in neither.
    index("audit_events_charge").on(t.chargeId),
    index("audit_events_payout").on(t.reference).where(sql`${t.type} = 'payout.paid'`),
    index("audit_events_refund").on(t.reference).where(sql`${t.type} = 'charge.refunded'`),
  ],
);
