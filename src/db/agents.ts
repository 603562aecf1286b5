import { sql } from "drizzle-orm";
import { check, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const agents = sqliteTable(
  "agents",
  {
    id: text("id").primaryKey(),
    name: text("name").notNull(),
    /** SHA-256 hex of the agent API key. */
    apiKeyHash: text("api_key_hash").notNull().unique(),
    /** The key before the last roll, working until `previousKeyExpiresAt` (its grace); at most two keys work at once. */
    previousApiKeyHash: text("previous_api_key_hash").unique(),
    previousKeyExpiresAt: text("previous_key_expires_at"),
    /** Set while the agent is frozen: nothing moves its money (the wallet object and every payment batch check it). */
    frozenAt: text("frozen_at"),
    frozenReason: text("frozen_reason"),
    /** The balance in whole cents, rounded down: always `balance_base_units / 10000` (a trigger holds it so). */
    balanceMinor: integer("balance_minor").notNull().default(0),
    /** The exact balance in the token's base units (1 cent = 10,000): the ledger's postings move this. */
    balanceBaseUnits: integer("balance_base_units").notNull().default(0),
    currency: text("currency").notNull().default("USD"),
    /** The spending policy as canonical JSON (see agents/policy.ts). */
    policy: text("policy").notNull().default("{}"),
    /** HD derivation index of the agent's deposit address (from DEPOSIT_MNEMONIC). */
    depositIndex: integer("deposit_index").unique(),
    depositAddress: text("deposit_address").unique(),
    createdAt: text("created_at").notNull(),
  },
  // The wallet Durable Object checks the balance first; this constraint makes an overdraft abort the whole batch anyway.
  (t) => [check("agent_balance_non_negative", sql`${t.balanceMinor} >= 0`)],
);
