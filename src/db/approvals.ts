import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const approvals = sqliteTable(
  "approvals",
  {
    id: text("id").primaryKey(),
    chargeId: text("charge_id").notNull(),
    agentId: text("agent_id").notNull(),
    merchantId: text("merchant_id").notNull(),
    /** The whole cents of `amount_base_units` (a trigger refuses any other). */
    amountMinor: integer("amount_minor").notNull(),
    /** The charge's exact amount, in the token's base units (1 cent = 10,000). */
    amountBaseUnits: integer("amount_base_units").notNull().default(0),
    reason: text("reason").notNull(),
    /** `pending`, `granted`, `rejected` or `expired`. */
    status: text("status").notNull(),
    expiresAt: text("expires_at").notNull(),
    createdAt: text("created_at").notNull(),
    decidedAt: text("decided_at"),
    decidedBy: text("decided_by"),
  },
  (t) => [
    // At most one pending approval per charge and agent, enforced by the database too.
    uniqueIndex("approvals_one_pending_per_charge_agent").on(t.chargeId, t.agentId).where(sql`status = 'pending'`),
    index("approvals_status_created").on(t.status, t.createdAt),
  ],
);
