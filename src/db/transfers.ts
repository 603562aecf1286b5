import { sql } from "drizzle-orm";
import { check, index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * A payment whose agent and charge live in different ledger shards moves in two phases through
 * transit accounts. This is the sending side, on the agent's shard: one row per transfer, written
 * with the debit (`pending`) and decided once (`completed` or `reversed`) after the receiving shard
 * decided. `arrival_plan` is the receiving side's plan, kept so recovery replays the very same one.
 */
export const ledgerTransfers = sqliteTable(
  "ledger_transfers",
  {
    /** The payment reference (`PAY_…`), also the ledger entries' transfer id on both shards. */
    id: text("id").primaryKey(),
    kind: text("kind", { enum: ["payment"] }).notNull(),
    toShard: integer("to_shard").notNull(),
    agentId: text("agent_id").notNull(),
    merchantId: text("merchant_id").notNull(),
    chargeId: text("charge_id").notNull(),
    amountMinor: integer("amount_minor").notNull(),
    /** JSON of the receiving shard's CommitPlan. */
    arrivalPlan: text("arrival_plan").notNull(),
    /** JSON: the request's idempotency slot and its answer, stored when the transfer completes; or NULL. */
    answer: text("answer"),
    status: text("status", { enum: ["pending", "completed", "reversed"] }).notNull(),
    createdAt: text("created_at").notNull(),
    decidedAt: text("decided_at"),
  },
  (t) => [
    // The recovery scan reads pending transfers oldest first; partial, so it holds only those.
    index("ledger_transfers_pending").on(t.createdAt).where(sql`${t.status} = 'pending'`),
    // Spent today, and a retry looking for its own transfer of a charge.
    index("ledger_transfers_agent").on(t.agentId, t.createdAt),
    check("ledger_transfers_kind", sql`${t.kind} IN ('payment')`),
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
