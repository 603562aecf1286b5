import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * A merchant's withdrawal: debited from its balance when created (`pending`), then `paid` once the
 * on-chain transfer is confirmed, or `failed` with the amount credited back by a reversing entry.
 */
export const payouts = sqliteTable(
  "payouts",
  {
    id: text("id").primaryKey(),
    merchantId: text("merchant_id").notNull(),
    amountMinor: integer("amount_minor").notNull(),
    currency: text("currency").notNull(),
    /** The merchant's payout address when the payout was made. */
    destination: text("destination").notNull(),
    status: text("status").notNull(),
    txHash: text("tx_hash"),
    failureReason: text("failure_reason"),
    createdAt: text("created_at").notNull(),
    paidAt: text("paid_at"),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("payouts_merchant_created").on(t.merchantId, t.createdAt),
    index("payouts_status").on(t.status, t.createdAt),
  ],
);

/**
 * Money given back on a paid charge. Wallet and PayLink refunds are `succeeded` in the batch that
 * makes them; x402 refunds go back on chain to the payer and live as payouts do.
 */
export const refunds = sqliteTable(
  "refunds",
  {
    id: text("id").primaryKey(),
    chargeId: text("charge_id").notNull(),
    merchantId: text("merchant_id").notNull(),
    agentId: text("agent_id"),
    /** The whole cents of `amount_base_units`, rounded down (a trigger holds it so). */
    amountMinor: integer("amount_minor").notNull(),
    /** The exact amount in the token's base units: a refund of a charge below a cent is below a cent too. */
    amountBaseUnits: integer("amount_base_units").notNull().default(0),
    currency: text("currency").notNull(),
    /** The charge's method: `ledger`, `paylink` or `x402`. */
    method: text("method").notNull(),
    /** The payer's address for an x402 refund; null for a wallet refund. */
    destination: text("destination"),
    status: text("status").notNull(),
    txHash: text("tx_hash"),
    failureReason: text("failure_reason"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    index("refunds_charge_created").on(t.chargeId, t.createdAt),
    index("refunds_status").on(t.status, t.createdAt),
  ],
);

/**
 * Every token transfer the service sends itself (payouts, x402 refunds, sweeps), as the EIP-3009
 * authorization that makes it: signed by the key of `from_address` with a nonce fixed when the row
 * is written, so however often it is handed to the chain it moves the money at most once.
 * `broadcast_at` is set before the first hand-over: until then the row can still fail without
 * asking the chain. Status: `pending`, `confirmed` (`tx_hash` set) or `failed`.
 */
export const outboundTransfers = sqliteTable(
  "outbound_transfers",
  {
    id: text("id").primaryKey(),
    /** `payout`, `refund` or `sweep`. */
    purpose: text("purpose").notNull(),
    /** The payout, refund, deposit or x402 payment it belongs to: one transfer each. */
    ownerId: text("owner_id").notNull(),
    network: text("network").notNull(),
    asset: text("asset").notNull(),
    fromAddress: text("from_address").notNull(),
    /** How the service derives the sender's key: `settlement`, or `deposit:<index>` / `receiving:<index>` of the receiving key. */
    signer: text("signer").notNull(),
    toAddress: text("to_address").notNull(),
    /** Token base units as a decimal string. */
    value: text("value").notNull(),
    nonce: text("nonce").notNull(),
    validBefore: integer("valid_before").notNull(),
    status: text("status").notNull(),
    broadcastAt: text("broadcast_at"),
    /** The chain's head when the transfer was first handed over: its logs are searched from there (a little before). */
    sentBlock: integer("sent_block"),
    txHash: text("tx_hash"),
    failureReason: text("failure_reason"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("outbound_transfers_owner").on(t.purpose, t.ownerId),
    uniqueIndex("outbound_transfers_authorization").on(t.fromAddress, t.nonce),
    index("outbound_transfers_status").on(t.status, t.purpose, t.updatedAt),
  ],
);
