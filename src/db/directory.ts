import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * The shard directory, in the control database (DB): the ledger shard each merchant and agent lives
 * in, written once in the batch that creates the owner. Triggers (migration) refuse every UPDATE and
 * DELETE, so an owner is never moved silently: there is no code path that moves one.
 */
export const shardDirectory = sqliteTable(
  "shard_directory",
  {
    ownerKind: text("owner_kind", { enum: ["merchant", "agent"] }).notNull(),
    ownerId: text("owner_id").notNull(),
    shard: integer("shard").notNull(),
    assignedAt: text("assigned_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.ownerKind, t.ownerId] }),
    index("shard_directory_shard").on(t.shard),
    check("shard_directory_owner_kind", sql`${t.ownerKind} IN ('merchant', 'agent')`),
    check("shard_directory_shard_non_negative", sql`${t.shard} >= 0`),
  ],
);
