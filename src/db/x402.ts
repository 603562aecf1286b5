import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * Every x402 payment we accepted for settlement, reserved by (network, asset,
 * payer, nonce) before the facilitator is called: one authorization can pay
 * at most one charge, once. Status: `settling`, `settled`, `failed`, or
 * `unknown` (the outcome was lost after a possible broadcast; reconciled
 * against the chain).
 */
export const x402Payments = sqliteTable(
  "x402_payments",
  {
    id: text("id").primaryKey(),
    network: text("network").notNull(),
    asset: text("asset").notNull(),
    payer: text("payer").notNull(),
    nonce: text("nonce").notNull(),
    chargeId: text("charge_id").notNull(),
    /** Token base units as a decimal string (bigint). */
    value: text("value").notNull(),
    validBefore: integer("valid_before").notNull(),
    /** The normalized authorization and signature, kept for reconciliation. */
    payload: text("payload").notNull(),
    status: text("status").notNull(),
    txHash: text("tx_hash"),
    error: text("error"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("x402_payments_authorization").on(t.network, t.asset, t.payer, t.nonce),
    index("x402_payments_status").on(t.status, t.updatedAt),
    index("x402_payments_charge").on(t.chargeId),
  ],
);

/** Stablecoin transfers credited to agent deposit addresses: one row per (tx, log), so each is credited once. */
export const deposits = sqliteTable(
  "deposits",
  {
    id: text("id").primaryKey(),
    network: text("network").notNull(),
    txHash: text("tx_hash").notNull(),
    logIndex: integer("log_index").notNull(),
    blockNumber: integer("block_number").notNull(),
    agentId: text("agent_id").notNull(),
    address: text("address").notNull(),
    sender: text("sender").notNull(),
    /** Token base units as a decimal string. */
    value: text("value").notNull(),
    amountMinor: integer("amount_minor").notNull(),
    /** `credited`, or `blocked` when the sender failed screening (held for an operator, not credited). */
    status: text("status").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [uniqueIndex("deposits_tx_log").on(t.network, t.txHash, t.logIndex)],
);

/** How far a chain watcher has read, per network and purpose. */
export const chainCursors = sqliteTable("chain_cursors", {
  name: text("name").primaryKey(),
  blockNumber: integer("block_number").notNull(),
  updatedAt: text("updated_at").notNull(),
});
