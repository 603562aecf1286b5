import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * One treasury reconciliation: the service's holdings read from the chain at one block against
 * what the ledger expects it to hold. Kept for every check, so the console can chart the history
 * and a shortfall is announced once per episode (when the check before it was not short).
 */
export const treasuryChecks = sqliteTable(
  "treasury_checks",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    at: text("at").notNull(),
    asOfBlock: integer("as_of_block").notNull(),
    /** `balanced`, `surplus` or `shortfall`. */
    status: text("status").notNull(),
    // Token base units as decimal strings: they can pass 2^53.
    settlementBaseUnits: text("settlement_base_units").notNull(),
    depositAddressesBaseUnits: text("deposit_addresses_base_units").notNull(),
    totalBaseUnits: text("total_base_units").notNull(),
    expectedBaseUnits: text("expected_base_units").notNull(),
    differenceBaseUnits: text("difference_base_units").notNull(),
    onChainInMinor: integer("on_chain_in_minor").notNull(),
    onChainOutMinor: integer("on_chain_out_minor").notNull(),
    pendingOutMinor: integer("pending_out_minor").notNull(),
    /** Money between two ledger shards when the check ran (internal: not part of the verdict). */
    inTransitMinor: integer("in_transit_minor").notNull().default(0),
    /** How many receiving addresses were read besides the settlement address. */
    addressesRead: integer("addresses_read").notNull(),
  },
  (t) => [index("treasury_checks_at").on(t.at)],
);

/**
 * A signed checkpoint of the audit chain's head, and its record on chain. `fromSeq`..`seq` are the
 * rows it covers (those after the checkpoint before it); `rowsRoot` is the Merkle root of their
 * hashes, so one row can be tied to the checkpoint without showing the rows around it.
 */
export const auditCheckpoints = sqliteTable(
  "audit_checkpoints",
  {
    seq: integer("seq").primaryKey(),
    hash: text("hash").notNull(),
    fromSeq: integer("from_seq").notNull(),
    rowsRoot: text("rows_root").notNull(),
    signedAt: text("signed_at").notNull(),
    kid: text("kid").notNull(),
    jws: text("jws").notNull(),
    /** `pending` (not on chain yet), `sent`, `confirmed`, or `failed` (to be sent again). */
    anchorStatus: text("anchor_status").notNull(),
    /** The gas address that sends (or sent) the anchoring transaction. */
    anchorFrom: text("anchor_from"),
    txHash: text("tx_hash"),
    blockNumber: integer("block_number"),
    broadcastAt: text("broadcast_at"),
    anchoredAt: text("anchored_at"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("audit_checkpoints_anchor").on(t.anchorStatus, t.updatedAt)],
);

/**
 * The last point of the audit chain a verification reached from genesis, or from the point before
 * it (src/audit/verification.ts): the next one re-hashes only the rows after `seq`, once row `seq`
 * still has `hash`. `jws` (the receipt key) signs the other fields, so a row written by anyone but
 * the service is ignored. One row is kept; it is a shortcut, never what makes a verdict.
 */
export const auditVerifications = sqliteTable("audit_verifications", {
  seq: integer("seq").primaryKey(),
  hash: text("hash").notNull(),
  /** The point that verification continued after: 0 for genesis. */
  fromSeq: integer("from_seq").notNull(),
  verifiedAt: text("verified_at").notNull(),
  jws: text("jws").notNull(),
});
