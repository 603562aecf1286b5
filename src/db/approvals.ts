import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * A payment held for a human. It holds either a charge (`charge_id`, `merchant_id` set) or an
 * agent's outbound x402 payment (`charge_id` null; `resource`, `pay_to`, `network`, `asset` and
 * the exact amount name the one request it lets through).
 */
export const approvals = sqliteTable(
  "approvals",
  {
    id: text("id").primaryKey(),
    /** The held charge; null for an outbound x402 payment. */
    chargeId: text("charge_id"),
    agentId: text("agent_id").notNull(),
    /** The held charge's merchant; null for an outbound x402 payment (it pays no merchant of the service). */
    merchantId: text("merchant_id"),
    /** The whole cents of `amount_base_units` (a trigger refuses any other). */
    amountMinor: integer("amount_minor").notNull(),
    /** The held payment's exact amount, in the token's base units (1 cent = 10,000). */
    amountBaseUnits: integer("amount_base_units").notNull().default(0),
    /** Outbound x402 only: the URL paid for, the payee, and the entry's network and asset. */
    resource: text("resource"),
    payTo: text("pay_to"),
    network: text("network"),
    asset: text("asset"),
    /** Outbound x402 only: the payment that used this granted approval (it lets one through). */
    x402PaymentId: text("x402_payment_id"),
    reason: text("reason").notNull(),
    /** `pending`, `granted`, `rejected` or `expired`. */
    status: text("status").notNull(),
    expiresAt: text("expires_at").notNull(),
    createdAt: text("created_at").notNull(),
    decidedAt: text("decided_at"),
    decidedBy: text("decided_by"),
  },
  (t) => [
    // At most one pending approval per charge and agent, enforced by the database too.
    uniqueIndex("approvals_one_pending_per_charge_agent").on(t.chargeId, t.agentId).where(sql`status = 'pending'`),
    index("approvals_status_created").on(t.status, t.createdAt),
    // At most one pending approval per outbound request (agent, resource, payee, exact amount, network, asset).
    uniqueIndex("approvals_one_pending_per_x402_request")
      .on(t.agentId, t.resource, t.payTo, t.amountBaseUnits, t.network, t.asset)
      .where(sql`status = 'pending' AND charge_id IS NULL`),
    // The agent's approvals of outbound requests, found by the request they name.
    index("approvals_x402_request").on(t.agentId, t.resource, t.payTo, t.amountBaseUnits).where(sql`charge_id IS NULL`),
  ],
);
