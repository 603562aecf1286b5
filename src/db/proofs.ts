import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

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
    /** The operator's booked float, part of `expected_base_units` (decimal text; "0" on checks from before fundings). */
    floatBaseUnits: text("float_base_units").notNull().default("0"),
    /**
     * The exact figures the cents columns above round down (decimal text). Checks from before amounts
     * below a cent existed hold their cents x 10,000, which was exact then.
     */
    onChainInBaseUnits: text("on_chain_in_base_units").notNull().default("0"),
    onChainOutBaseUnits: text("on_chain_out_base_units").notNull().default("0"),
    pendingOutBaseUnits: text("pending_out_base_units").notNull().default("0"),
    /** How many receiving addresses were read besides the settlement address. */
    addressesRead: integer("addresses_read").notNull(),
  },
  (t) => [index("treasury_checks_at").on(t.at)],
);

/**
 * Tokens the operator put into the treasury on purpose (a float to pay payouts from), booked once
 * per transaction: the sum of that transaction's transfers of the token to the settlement address.
 * The ledger's expectation counts every row of the deployment's network and token. Lives in
 * control (shard 0), never updated or deleted; its audit row is written in the same batch.
 */
export const treasuryFundings = sqliteTable(
  "treasury_fundings",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** The transaction hash, lower case: a transaction is booked at most once. */
    txHash: text("tx_hash").notNull(),
    network: text("network").notNull(),
    /** The token contract, lower case. */
    asset: text("asset").notNull(),
    /** Token base units as a decimal string (they can pass 2^53). */
    amountBaseUnits: text("amount_base_units").notNull(),
    blockNumber: integer("block_number").notNull(),
    /** The console user who booked it. */
    bookedBy: text("booked_by").notNull(),
    bookedAt: text("booked_at").notNull(),
  },
  (t) => [uniqueIndex("treasury_fundings_tx").on(t.txHash)],
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
    /** The chain's head when the anchor was first handed over: the anchor is searched for from there. */
    sentBlock: integer("sent_block"),
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
