import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * An agent's payment of someone else's x402 paywall, in the agent's home: the EIP-3009 authorization
 * the service signed from its settlement address, written in the batch that debits the wallet.
 * Status: `authorized` (signed and debited), then `settled` (the token shows the authorization used)
 * or `released` (it expired unused; the debit is given back).
 */
export const agentX402Payments = sqliteTable(
  "agent_x402_payments",
  {
    id: text("id").primaryKey(),
    agentId: text("agent_id").notNull(),
    /** The URL the agent pays for, as it handed it over. */
    resource: text("resource").notNull(),
    /** The authorization's `to`, checksummed. */
    payTo: text("pay_to").notNull(),
    /** The network as the paywall's entry named it (`base-sepolia` or `eip155:84532`). */
    network: text("network").notNull(),
    /** The token, checksummed. */
    asset: text("asset").notNull(),
    /** Exactly what the authorization moves, in the token's base units. */
    amountBaseUnits: integer("amount_base_units").notNull(),
    /** The authorization's 32-byte nonce (hex): its `from` is the settlement address. */
    nonce: text("nonce").notNull(),
    /** Unix seconds after which the authorization can no longer be used. */
    validBefore: integer("valid_before").notNull(),
    /** The header the agent sends with its request again (`X-PAYMENT` or `PAYMENT-SIGNATURE`) and its value. */
    headerName: text("header_name").notNull(),
    headerValue: text("header_value").notNull(),
    status: text("status").notNull(),
    /**
     * The chain's head when the service checked the settlement address could cover it (null for rows
     * from before): a search for the transaction that used the authorization starts a little before it.
     */
    recordedBlock: integer("recorded_block"),
    txHash: text("tx_hash"),
    createdAt: text("created_at").notNull(),
    settledAt: text("settled_at"),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("agent_x402_payments_nonce").on(t.nonce),
    index("agent_x402_payments_agent_created").on(t.agentId, t.createdAt),
    index("agent_x402_payments_status").on(t.status, t.validBefore),
    // The reconciliation's pass: authorized payments, the one looked at longest ago first.
    index("agent_x402_payments_due").on(t.status, t.updatedAt),
  ],
);
