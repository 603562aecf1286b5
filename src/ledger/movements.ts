import { outboxEvent } from "../webhooks/outbox";
import { guard, sqlStatement, type CommitPlan, type SqlStatement } from "./plan";
import { postingStatements } from "./postings";

export interface PayableCharge {
  id: string;
  merchantId: string;
  amountMinor: number;
  currency: string;
  description: string | null;
}

export interface WalletPayment {
  charge: PayableCharge;
  agentId: string;
  method: "ledger" | "paylink";
  reference: string;
  paidAt: string;
  /** Statements that must run first: creating the charge being paid, when it is new. */
  prelude?: SqlStatement[];
  /** Guards and statements a caller adds (an approval being granted, a grant being drawn). */
  extraStatements?: SqlStatement[];
  auditData?: Record<string, unknown>;
}

/** Fields of `payment.succeeded` and `charge.succeeded`. */
export const paymentEventData = (charge: PayableCharge, agentId: string | null, method: string, reference: string) => ({
  chargeId: charge.id,
  merchantId: charge.merchantId,
  agentId,
  amountMinor: charge.amountMinor,
  currency: charge.currency,
  method,
  reference,
});

/**
 * One wallet payment as one batch: the charge flips from pending to paid (and
 * the batch aborts if it is no longer pending), the agent is debited and the
 * merchant credited by a zero-sum transfer, the payment events go to the
 * outbox and the audit chain records it. The last statement reads the
 * merchant's new balance.
 */
export function walletPaymentPlan(p: WalletPayment): CommitPlan {
  const { charge } = p;
  const data = paymentEventData(charge, p.agentId, p.method, p.reference);
  return {
    statements: [
      ...(p.prelude ?? []),
      guard("charge_not_pending", "EXISTS (SELECT 1 FROM charges WHERE id = ? AND status = 'pending')", charge.id),
      guard("saldo_insuficiente", "EXISTS (SELECT 1 FROM agents WHERE id = ? AND balance_minor >= ?)", p.agentId, charge.amountMinor),
      ...(p.extraStatements ?? []),
      sqlStatement(
        "UPDATE charges SET status = 'paid', agent_id = ?, method = ?, reference = ?, paid_at = ? WHERE id = ? AND status = 'pending'",
        p.agentId, p.method, p.reference, p.paidAt, charge.id,
      ),
      // A charge born from a checkout link moves the link's counters in the same batch.
      sqlStatement(
        "UPDATE checkout_links SET payments_count = payments_count + 1, total_paid_minor = total_paid_minor + ? WHERE id = (SELECT checkout_link_id FROM charges WHERE id = ?)",
        charge.amountMinor, charge.id,
      ),
      // Other agents' approvals for this charge can no longer be granted.
      sqlStatement("UPDATE approvals SET status = 'expired', decided_at = ? WHERE charge_id = ? AND status = 'pending'", p.paidAt, charge.id),
      ...postingStatements(p.reference, [{ from: `agent:${p.agentId}`, to: `merchant:${charge.merchantId}`, amountMinor: charge.amountMinor }], p.paidAt),
      outboxEvent("payment.succeeded", charge.merchantId, data, p.paidAt),
      outboxEvent("charge.succeeded", charge.merchantId, data, p.paidAt),
      sqlStatement("SELECT balance_minor AS balanceMinor FROM merchants WHERE id = ?", charge.merchantId),
    ],
    audit: [
      {
        type: "charge.paid",
        reference: p.reference,
        chargeId: charge.id,
        agentId: p.agentId,
        merchantId: charge.merchantId,
        amountMinor: charge.amountMinor,
        currency: charge.currency,
        data: { method: p.method, description: charge.description, ...p.auditData },
        createdAt: p.paidAt,
      },
    ],
  };
}

/** A manual top-up of an agent wallet from outside the service. */
export function agentCreditPlan(p: { agentId: string; amountMinor: number; transferId: string; reference: string | null; by: string; createdAt: string }): CommitPlan {
  return {
    statements: [
      guard("agent_not_found", "EXISTS (SELECT 1 FROM agents WHERE id = ?)", p.agentId),
      ...postingStatements(p.transferId, [{ from: "external:manual_credits", to: `agent:${p.agentId}`, amountMinor: p.amountMinor }], p.createdAt),
      sqlStatement("SELECT balance_minor AS balanceMinor FROM agents WHERE id = ?", p.agentId),
    ],
    audit: [
      {
        type: "agent.credited",
        reference: p.transferId,
        chargeId: null,
        agentId: p.agentId,
        merchantId: null,
        amountMinor: p.amountMinor,
        currency: "USD",
        data: { externalReference: p.reference, by: p.by },
        createdAt: p.createdAt,
      },
    ],
  };
}
