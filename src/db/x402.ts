import { sql } from "drizzle-orm";
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
    /**
     * The address the authorization pays (its signed `to`): the receiving address of the charge or
     * checkout link it was made for. Null on rows from before receiving addresses: the settlement address.
     */
    payTo: text("pay_to"),
    /** Token base units as a decimal string (bigint). */
    value: text("value").notNull(),
    validBefore: integer("valid_before").notNull(),
    /** The normalized authorization and signature, kept for reconciliation. */
    payload: text("payload").notNull(),
    status: text("status").notNull(),
    txHash: text("tx_hash"),
    /**
     * The chain's head when the service found the authorization unused (the verification before the
     * reservation): it cannot have been used before, so its logs are searched from there.
     */
    seenBlock: integer("seen_block"),
    error: text("error"),
    /**
     * The v2 `payment-identifier` the payment carried: one per payer among payments that did not
     * fail, so a retry of the same purchase (a new authorization, the same id) finds this one.
     */
    paymentIdentifier: text("payment_identifier"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("x402_payments_authorization").on(t.network, t.asset, t.payer, t.nonce),
    uniqueIndex("x402_payments_identifier")
      .on(t.payer, t.paymentIdentifier)
      .where(sql`${t.paymentIdentifier} IS NOT NULL`),
    index("x402_payments_status").on(t.status, t.updatedAt),
    index("x402_payments_charge").on(t.chargeId),
    index("x402_payments_pay_to").on(t.payTo),
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

/**
 * The receiving address of each charge or checkout link that was offered for x402 payment: the
 * x402 `payTo` of that one charge or link, so an authorization (which signs its `to`) pays only
 * what it was made for. `idx` is the BIP-44 index under account 1 of the receiving key
 * (m/44'/60'/1'/0/idx); `address` is derived from it right after the index is taken.
 */
export const receivingAddresses = sqliteTable(
  "receiving_addresses",
  {
    idx: integer("idx").primaryKey(),
    /** A charge (`chg_`), a checkout link (`cl_`) or a merchant (`mer_`). */
    ownerId: text("owner_id").notNull(),
    /** `charge`, `checkout_link`, or `merchant` (the one address of a merchant's own x402 routes). */
    ownerKind: text("owner_kind").notNull(),
    merchantId: text("merchant_id").notNull(),
    address: text("address"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("receiving_addresses_owner").on(t.ownerId),
    uniqueIndex("receiving_addresses_address").on(t.address),
    index("receiving_addresses_merchant").on(t.merchantId),
  ],
);

/**
 * The resources of merchants' own x402 routes that declared the `bazaar` discovery extension, listed
 * once a payment for them settled through the service as their facilitator: one row per merchant and
 * URL, the requirements and metadata of its latest settled payment.
 */
export const x402Resources = sqliteTable(
  "x402_resources",
  {
    merchantId: text("merchant_id").notNull(),
    /** The paid URL, without query. */
    resource: text("resource").notNull(),
    /** `http` or `mcp`, as the extension declared. */
    type: text("type").notNull(),
    x402Version: integer("x402_version").notNull(),
    /** The payment requirements, as JSON (an array of one). */
    accepts: text("accepts").notNull(),
    description: text("description"),
    mimeType: text("mime_type"),
    /** The extensions as the payment carried them, as JSON (`bazaar`'s info and schema). */
    extensions: text("extensions"),
    /** When the first settled payment listed it. */
    listedAt: text("listed_at").notNull(),
    /** When the requirements and metadata were last taken from a settled payment. */
    updatedAt: text("updated_at").notNull(),
    lastPaidAt: text("last_paid_at").notNull(),
  },
  (t) => [
    uniqueIndex("x402_resources_merchant_resource").on(t.merchantId, t.resource),
    index("x402_resources_listed").on(t.listedAt),
  ],
);
