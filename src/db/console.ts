import { sqliteTable, text } from "drizzle-orm/sqlite-core";

/** Console users added from the console, beside the configured CONSOLE_USERS. */
export const consoleUsers = sqliteTable("console_users", {
  email: text("email").primaryKey(),
  addedBy: text("added_by").notNull(),
  createdAt: text("created_at").notNull(),
});

/** Operator-added KYT blocklist entries (the built-in OFAC list ships in code). */
export const kytBlocklist = sqliteTable("kyt_blocklist", {
  /** Lower-case 0x address. */
  address: text("address").primaryKey(),
  reason: text("reason").notNull(),
  addedBy: text("added_by").notNull(),
  createdAt: text("created_at").notNull(),
});
