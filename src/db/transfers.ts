import { sql } from "drizzle-orm";
import { check, index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * Money moving between two ledger shards goes in two phases through transit accounts. This is the
 * sending side: one row per transfer, written with the debit (`pending`) and decided once
 * (`completed` or `reversed`) after the receiving shard decided. `kind` says what moves: a wallet
 * `payment` (sent from the agent's shard to the charge's) or a `refund` of one (sent from the
 * charge's shard back to the agent's). The receiving side's plan is rebuilt from the row's fields
 * by kind (never stored as SQL), so every driver builds the very same one.
 */
export const ledgerTransfers = sqliteTable(
  "ledger_transfers",
  {
    /** The payment reference (`PAY_…`) or the refund's id, also the ledger entries' transfer id on both shards. */
    id: text("id").primaryKey(),
    kind: text("kind", { enum: ["payment", "refund"] }).notNull(),
    toShard: integer("to_shard").notNull(),
    agentId: text("agent_id").notNull(),
    merchantId: text("merchant_id").notNull(),
    chargeId: text("charge_id").notNull(),
    amountMinor: integer("amount_minor").notNull(),
    currency: text("currency").notNull().default("USD"),
    /** A payment's charge as its arrival pays it: its description and the checkout link it was born from. */
    description: text("description"),
    checkoutLinkId: text("checkout_link_id"),
    /** JSON: the request's idempotency slot and its answer, stored when the transfer completes; or NULL. */
    answer: text("answer"),
    /**
     * JSON, a payment's arrival beyond paying a stored charge (a charge born with it, a PayLink
     * grant's guarded figures, its method and audit data), as decided by its request; or NULL.
     */
    arrivalExtras: text("arrival_extras"),
    status: text("status", { enum: ["pending", "completed", "reversed"] }).notNull(),
    createdAt: text("created_at").notNull(),
    decidedAt: text("decided_at"),
    /** How many times the recovery cron handed it over, and when it next may (backing off, so a stuck one does not starve the rest). */
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: text("next_attempt_at").notNull(),
  },
  (t) => [
    // The recovery scan reads pending transfers due first; partial, so it holds only those.
    index("ledger_transfers_pending").on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    // Spent today, and a retry looking for its own transfer of a charge.
    index("ledger_transfers_agent").on(t.agentId, t.createdAt),
    check("ledger_transfers_kind", sql`${t.kind} IN ('payment', 'refund')`),
    check("ledger_transfers_status", sql`${t.status} IN ('pending', 'completed', 'reversed')`),
    check("ledger_transfers_amount_positive", sql`${t.amountMinor} > 0`),
  ],
);

/**
 * The receiving side's one decision per transfer id, on the charge's shard: `applied` (the charge
 * was paid and the merchant credited in the same batch) or `refused` (with the reason). The primary
 * key makes it the exactly-once key: every later attempt reads the decision instead of making one.
 */
export const ledgerArrivals = sqliteTable(
  "ledger_arrivals",
  {
    id: text("id").primaryKey(),
    fromShard: integer("from_shard").notNull(),
    outcome: text("outcome", { enum: ["applied", "refused"] }).notNull(),
    reason: text("reason"),
    /** The merchant's balance right after an applied arrival: the figure the payment's answer names. */
    balanceAfter: integer("balance_after"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [check("ledger_arrivals_outcome", sql`${t.outcome} IN ('applied', 'refused')`)],
);
