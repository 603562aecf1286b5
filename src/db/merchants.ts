import { sql } from "drizzle-orm";
import { check, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const merchants = sqliteTable(
  "merchants",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    category: text("category"),
    /** SHA-256 hex of the API key; the key itself is never stored. */
    apiKeyHash: text("api_key_hash").notNull().unique(),
    /** The key before the last roll, working until `previousKeyExpiresAt` (its grace); at most two keys work at once. */
    previousApiKeyHash: text("previous_api_key_hash").unique(),
    previousKeyExpiresAt: text("previous_key_expires_at"),
    /** The balance in whole cents, rounded down: always `balance_base_units / 10000` (a trigger holds it so). */
    balanceMinor: integer("balance_minor").notNull().default(0),
    /** The exact balance in the token's base units (1 cent = 10,000): the ledger's postings move this. */
    balanceBaseUnits: integer("balance_base_units").notNull().default(0),
    currency: text("currency").notNull().default("USD"),
    payoutAddress: text("payout_address"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [check("merchant_balance_non_negative", sql`${t.balanceMinor} >= 0`)],
);

/**
 * Whether the merchant exists (in control, where every merchant's identity is). For webhooks, which
 * sits below merchants/ (the outbox is written by the ledger, which the merchants' key rolls commit
 * through) and scopes an endpoint to a merchant: the statement stays beside the table's schema.
 */
export const merchantExists = async (control: D1Database, merchantId: string) =>
  (await control.prepare("SELECT 1 AS found FROM merchants WHERE id = ?").bind(merchantId).first()) !== null;
