import { sql } from "drizzle-orm";
import { check, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const paylinks = sqliteTable("paylinks", {
  id: text("id").primaryKey(),
  /** The public identifier used in `/pl/<code>`. */
  code: text("code").notNull().unique(),
  merchantId: text("merchant_id").notNull(),
  label: text("label"),
  /** The budget each accepting agent's grant may draw, in total. */
  budgetMinor: integer("budget_minor").notNull(),
  perChargeMinor: integer("per_charge_minor"),
  maxUses: integer("max_uses"),
  expiresAt: text("expires_at"),
  createdAt: text("created_at").notNull(),
});

/** An agent's acceptance of a PayLink: the human authorization the merchant draws on. */
export const paylinkGrants = sqliteTable(
  "paylink_grants",
  {
    id: text("id").primaryKey(),
    paylinkId: text("paylink_id").notNull(),
    agentId: text("agent_id").notNull(),
    merchantId: text("merchant_id").notNull(),
    spentMinor: integer("spent_minor").notNull().default(0),
    uses: integer("uses").notNull().default(0),
    budgetMinor: integer("budget_minor").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("paylink_grants_paylink_agent").on(t.paylinkId, t.agentId),
    check("paylink_grant_within_budget", sql`${t.spentMinor} >= 0 AND ${t.spentMinor} <= ${t.budgetMinor}`),
  ],
);
