import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * One segment of history archived to R2 (src/archive/): audit rows `firstSeq`..`lastSeq` and the
 * ledger entries with ids after `afterEntryId` up to `lastEntryId`. `planned` is written before the
 * object, so a run that crashes resumes with the same bounds and bytes; `verified` once the object
 * was read back and checked (from then on readers take those rows from R2); `done` once the rows
 * are gone from D1.
 */
export const archiveSegments = sqliteTable(
  "archive_segments",
  {
    firstSeq: integer("first_seq").primaryKey(),
    lastSeq: integer("last_seq").notNull(),
    /** The hash of row `firstSeq - 1` (genesis for the first segment): links the segment to the one before. */
    prevHash: text("prev_hash").notNull(),
    lastHash: text("last_hash").notNull(),
    afterEntryId: integer("after_entry_id").notNull(),
    lastEntryId: integer("last_entry_id").notNull(),
    rows: integer("rows").notNull(),
    entries: integer("entries").notNull(),
    /** The earliest and latest `createdAt` of the segment's audit rows (not monotonic in seq). */
    minCreatedAt: text("min_created_at").notNull(),
    maxCreatedAt: text("max_created_at").notNull(),
    objectKey: text("object_key").notNull(),
    /** SHA-256 of the whole object; null until written. */
    objectSha256: text("object_sha256"),
    status: text("status", { enum: ["planned", "verified", "done"] }).notNull(),
    archivedAt: text("archived_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("archive_segments_last_seq").on(t.lastSeq),
    index("archive_segments_created").on(t.minCreatedAt, t.maxCreatedAt),
  ],
);

/**
 * Per account, the sum of its archived ledger entries: updated in the same D1 batch that deletes
 * them, so an account's balance is always `carriedBaseUnits + SUM(its live ledger_entries' base units)`.
 */
export const archivedBalances = sqliteTable("archived_balances", {
  account: text("account").primaryKey(),
  /** The archived entries' cents, each truncated toward zero as entries state them: exact while every amount is whole cents. */
  carriedMinor: integer("carried_minor").notNull(),
  /** The archived entries' exact sum in base units: the account's balance is this plus its live entries' `amount_base_units`. */
  carriedBaseUnits: integer("carried_base_units").notNull().default(0),
  entries: integer("entries").notNull(),
});

/**
 * Where an archived receipt's audit row is: receipts and evidence find a payment's row by charge
 * (`charge.paid`) or by payout or refund id (`reference`), which an R2 segment cannot be searched by.
 * Archived manual credits (`agent.credited`) are kept by reference too: their transfer id stays refused.
 */
export const archivedAuditRefs = sqliteTable(
  "archived_audit_refs",
  {
    seq: integer("seq").primaryKey(),
    type: text("type").notNull(),
    chargeId: text("charge_id"),
    reference: text("reference"),
  },
  (t) => [index("archived_audit_refs_charge").on(t.chargeId), index("archived_audit_refs_reference").on(t.reference)],
);
