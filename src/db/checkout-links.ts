import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const checkoutLinks = sqliteTable(
  "checkout_links",
  {
    id: text("id").primaryKey(),
    /** The public identifier used in `/checkout/<token>`. */
    token: text("token").notNull().unique(),
    merchantId: text("merchant_id").notNull(),
    amountMinor: integer("amount_minor").notNull(),
    currency: text("currency").notNull().default("USD"),
    description: text("description").notNull(),
    externalId: text("external_id"),
    visits: integer("visits").notNull().default(0),
    /** Moved in the same batch as each payment, so they always agree with the charges. */
    paymentsCount: integer("payments_count").notNull().default(0),
    totalPaidMinor: integer("total_paid_minor").notNull().default(0),
    active: integer("active", { mode: "boolean" }).notNull().default(true),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("checkout_links_merchant_created").on(t.merchantId, t.createdAt)],
);
