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
    /** Signed cents: positive credits the account, negative debits it. */
    amountMinor: integer("amount_minor").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("ledger_entries_account").on(t.account), index("ledger_entries_transfer").on(t.transferId)],
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
    currency: text("currency").notNull(),
    /** Canonical JSON of the event's details. */
    data: text("data").notNull(),
    createdAt: text("created_at").notNull(),
    prevHash: text("prev_hash").notNull(),
    hash: text("hash").notNull(),
  },
  (t) => [
    index("audit_events_created").on(t.createdAt),
    // A receipt names the audit row of its payment: found by charge, or by payout or refund id.
    index("audit_events_charge").on(t.chargeId),
    index("audit_events_reference").on(t.reference),
  ],
);
