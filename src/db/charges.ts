import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const charges = sqliteTable(
  "charges",
  {
    id: text("id").primaryKey(),
    merchantId: text("merchant_id").notNull(),
    agentId: text("agent_id"),
    /**
     * The amount's whole cents, rounded down: always `amount_base_units / 10000` (a trigger holds it
     * so). An amount below or between cents is shown as null (see charges/responses.ts).
     */
    amountMinor: integer("amount_minor").notNull(),
    /** The exact amount in the token's base units (1 cent = 10,000). */
    amountBaseUnits: integer("amount_base_units").notNull().default(0),
    currency: text("currency").notNull().default("USD"),
    description: text("description"),
    externalId: text("external_id"),
    /** `pending` or `paid`. */
    status: text("status").notNull(),
    /** `ledger`, `x402` or `paylink` once paid. */
    method: text("method"),
    /**
     * `PAY_...` for ledger and PayLink payments, the transaction hash for x402: not unique, since the
     * charges settled in one batched transaction share its hash.
     */
    reference: text("reference"),
    createdAt: text("created_at").notNull(),
    paidAt: text("paid_at"),
    /** The checkout link this charge was materialized from, if any. */
    checkoutLinkId: text("checkout_link_id"),
    /** The PayLink grant this charge was drawn on, if any. */
    paylinkGrantId: text("paylink_grant_id"),
    /** The x402 payment settling this charge; while set, no other payment may take the charge. */
    x402Claim: text("x402_claim"),
    /**
     * The whole cents of `refunded_base_units`, rounded down (a trigger holds it so): a refund below a
     * cent leaves it as it was.
     */
    refundedMinor: integer("refunded_minor").notNull().default(0),
    /**
     * The exact sum, in base units, of its refunds that are not `failed` (never above
     * `amount_base_units`: a trigger aborts the batch with `refund_exceeds_remaining`).
     */
    refundedBaseUnits: integer("refunded_base_units").notNull().default(0),
    /** The URL an x402 payment settled through the service as a merchant's facilitator paid for; null for every other charge. */
    resource: text("resource"),
    /**
     * 1 for a charge made by a settlement through the service as a merchant's facilitator: only that
     * one payment may pay it, so no wallet and no other x402 payment ever takes it (also after that
     * settlement failed).
     */
    facilitated: integer("facilitated").notNull().default(0),
  },
  (t) => [
    index("charges_merchant_created").on(t.merchantId, t.createdAt),
    index("charges_agent_paid").on(t.agentId, t.paidAt),
    // Partial: most charges come from no link, and `checkout_link_id = ?` implies the condition.
    index("charges_checkout_link").on(t.checkoutLinkId).where(sql`${t.checkoutLinkId} IS NOT NULL`),
  ],
);
