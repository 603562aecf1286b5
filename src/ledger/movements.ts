import { type GuardCheck, guard, guards, type SqlStatement, sqlStatement } from "../db/statements";
import { INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { centsIfWhole } from "../lib/money";
import type { AuditDraft } from "./chain";
import { outboxEvent, outboxEvents } from "./outbox";
import type { CommitPlan } from "./plan";
import { centsPosting, postingStatements } from "./postings";

export interface PayableCharge {
  id: string;
  merchantId: string;
  amountMinor: number;
  /** The exact amount in the token's base units (a safe integer: see MAX_AMOUNT_MINOR); `amountMinor` is its whole cents. */
  amountBaseUnits: number;
  currency: string;
  description: string | null;
  /** The checkout link the charge was born from (set at creation, never after). */
  checkoutLinkId: string | null;
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
  /** Statements that must see the batch's writes (storing the answer that names the balances after it). */
  epilogue?: SqlStatement[];
  auditData?: Record<string, unknown>;
}

/**
 * What every payment method does to the charge it pays, in its batch: the
 * charge flips from pending to paid, a checkout link it was born from counts
 * it (only such a charge has the statement), and other pending approvals for
 * it can no longer be granted (a charge created in this same batch has none).
 */
export function chargePaidStatements(
  charge: PayableCharge,
  agentId: string | null,
  method: string,
  reference: string,
  paidAt: string,
  bornInBatch = false,
): SqlStatement[] {
  return [
    sqlStatement(
      "UPDATE charges SET status = 'paid', agent_id = ?, method = ?, reference = ?, paid_at = ? WHERE id = ? AND status = 'pending'",
      agentId,
      method,
      reference,
      paidAt,
      charge.id,
    ),
    ...(charge.checkoutLinkId
      ? [
          sqlStatement(
            "UPDATE checkout_links SET payments_count = payments_count + 1, total_paid_minor = total_paid_minor + ? WHERE id = ?",
            charge.amountMinor,
            charge.checkoutLinkId,
          ),
        ]
      : []),
    ...(bornInBatch
      ? []
      : [
          sqlStatement(
            "UPDATE approvals SET status = 'expired', decided_at = ? WHERE charge_id = ? AND status = 'pending'",
            paidAt,
            charge.id,
          ),
        ]),
  ];
}

/**
 * The wallet may still act on the charge: pending, not being settled on chain by an x402 payment,
 * and not made by a facilitated settlement (only that one payment pays it, even once it failed).
 */
export const chargePayableCheck = (chargeId: string): GuardCheck => [
  "charge_not_pending",
  "EXISTS (SELECT 1 FROM charges WHERE id = ? AND status = 'pending' AND x402_claim IS NULL AND facilitated = 0)",
  chargeId,
];

/** A disabled link takes no payment attempt (409), nor does a charge born from it. */
export const linkActiveCheck = (linkId: string): GuardCheck => [
  "checkout_link_disabled",
  "EXISTS (SELECT 1 FROM checkout_links WHERE id = ? AND active = 1)",
  linkId,
];

/**
 * Everything a payment or a hold re-checks about the charge in its batch: payable (above), and
 * for a charge born from a checkout link, the link still active.
 */
export const payableChecks = (charge: { id: string; checkoutLinkId: string | null }): GuardCheck[] => [
  chargePayableCheck(charge.id),
  ...(charge.checkoutLinkId ? [linkActiveCheck(charge.checkoutLinkId)] : []),
];

export const AGENT_FROZEN = "agent_frozen";

/**
 * The paying agent is not frozen, checked in the payment's own batch: the ledger commits one batch
 * at a time, so every payment it takes lands before the freeze's batch or is refused after it.
 */
export const agentNotFrozenCheck = (agentId: string): GuardCheck => [
  AGENT_FROZEN,
  "EXISTS (SELECT 1 FROM agents WHERE id = ? AND frozen_at IS NULL)",
  agentId,
];

/** Fields of `payment.succeeded` and `charge.succeeded`. */
export const paymentEventData = (charge: PayableCharge, agentId: string | null, method: string, reference: string) => ({
  chargeId: charge.id,
  merchantId: charge.merchantId,
  agentId,
  // Null when the amount is not whole cents; amountBaseUnits states it exactly.
  amountMinor: centsIfWhole(BigInt(charge.amountBaseUnits)),
  amountBaseUnits: String(charge.amountBaseUnits),
  currency: charge.currency,
  method,
  reference,
});

/** The audit row of a movement on a charge: the charge's amount and parties, `data` what the movement adds. */
export const chargeAudit = (
  type: string,
  charge: { id: string; merchantId: string; amountMinor: number; amountBaseUnits?: number; currency: string },
  by: { reference: string; agentId: string | null; at: string },
  data: Record<string, unknown>,
): AuditDraft => ({
  type,
  reference: by.reference,
  chargeId: charge.id,
  agentId: by.agentId,
  merchantId: charge.merchantId,
  amountMinor: charge.amountMinor,
  // Without it the sequencer takes the cents as the exact amount: a charge states it always.
  ...(charge.amountBaseUnits === undefined ? {} : { amountBaseUnits: String(charge.amountBaseUnits) }),
  currency: charge.currency,
  data,
  createdAt: by.at,
});

/**
 * One wallet payment as one batch: the charge flips from pending to paid (and
 * the batch aborts if it is no longer pending), the agent is debited and the
 * merchant credited by a zero-sum transfer, the payment events go to the
 * outbox and the audit chain records it. The merchant's balance after it is
 * its posting's answer (`balanceAfter`).
 */
export function walletPaymentPlan(p: WalletPayment): CommitPlan {
  const { charge } = p;
  const data = paymentEventData(charge, p.agentId, p.method, p.reference);
  return {
    statements: [
      ...(p.prelude ?? []),
      // The exact amount: an agent with 5,000 base units pays a charge of 5,000, not one of 5,001.
      guards(...payableChecks(charge), agentNotFrozenCheck(p.agentId), [
        INSUFFICIENT_BALANCE,
        "EXISTS (SELECT 1 FROM agents WHERE id = ? AND balance_base_units >= ?)",
        p.agentId,
        charge.amountBaseUnits,
      ]),
      ...(p.extraStatements ?? []),
      // A prelude creates the charge: nothing can have asked for its approval yet.
      ...chargePaidStatements(charge, p.agentId, p.method, p.reference, p.paidAt, (p.prelude?.length ?? 0) > 0),
      ...postingStatements(
        p.reference,
        [
          {
            from: `agent:${p.agentId}`,
            to: `merchant:${charge.merchantId}`,
            amountBaseUnits: BigInt(charge.amountBaseUnits),
          },
        ],
        p.paidAt,
      ),
      outboxEvents(charge.merchantId, data, p.paidAt, "payment.succeeded", "charge.succeeded"),
      ...(p.epilogue ?? []),
    ],
    audit: [
      chargeAudit(
        "charge.paid",
        charge,
        { reference: p.reference, agentId: p.agentId, at: p.paidAt },
        { method: p.method, description: charge.description, ...p.auditData },
      ),
    ],
  };
}

/**
 * A manual top-up of an agent wallet from outside the service. Its transfer id
 * is recorded once: the sequencer commits a plan again when it cannot tell
 * whether its batch landed (a lost answer), and nothing else about a credit
 * would refuse the second time (`credit_already_recorded`).
 */
export function agentCreditPlan(p: {
  agentId: string;
  amountMinor: number;
  transferId: string;
  reference: string | null;
  by: string;
  createdAt: string;
  epilogue?: SqlStatement[];
}): CommitPlan {
  return {
    statements: [
      guards(
        ["agent_not_found", "EXISTS (SELECT 1 FROM agents WHERE id = ?)", p.agentId],
        // ledger_entries_transfer indexes transfer_id; a credit whose entries were archived is in archived_audit_refs.
        [
          "credit_already_recorded",
          `NOT EXISTS (SELECT 1 FROM ledger_entries WHERE transfer_id = ?)
           AND NOT EXISTS (SELECT 1 FROM archived_audit_refs WHERE reference = ? AND type = 'agent.credited')`,
          p.transferId,
          p.transferId,
        ],
      ),
      ...postingStatements(
        p.transferId,
        [centsPosting("external:manual_credits", `agent:${p.agentId}`, p.amountMinor)],
        p.createdAt,
      ),
      ...(p.epilogue ?? []),
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

export interface X402Settlement {
  charge: PayableCharge;
  paymentId: string;
  network: string;
  payer: string;
  transaction: string;
  paidAt: string;
}

/**
 * An x402 settlement credited as one batch: only while the charge is pending
 * and claimed by this payment, and the payment is not yet settled, so a
 * settlement is credited exactly once however often it is reported.
 */
export function x402PaymentPlan(p: X402Settlement): CommitPlan {
  const { charge } = p;
  const data = { ...paymentEventData(charge, null, "x402", p.transaction), payer: p.payer, network: p.network };
  return {
    statements: [
      guards(
        [
          "charge_not_claimed",
          "EXISTS (SELECT 1 FROM charges WHERE id = ? AND status = 'pending' AND x402_claim = ?)",
          charge.id,
          p.paymentId,
        ],
        [
          "x402_payment_not_open",
          "EXISTS (SELECT 1 FROM x402_payments WHERE id = ? AND status IN ('settling', 'unknown'))",
          p.paymentId,
        ],
      ),
      sqlStatement(
        "UPDATE x402_payments SET status = 'settled', tx_hash = ?, error = NULL, updated_at = ? WHERE id = ?",
        p.transaction,
        p.paidAt,
        p.paymentId,
      ),
      ...chargePaidStatements(charge, null, "x402", p.transaction, p.paidAt),
      ...postingStatements(
        p.transaction,
        [
          {
            from: `external:x402:${p.network}`,
            to: `merchant:${charge.merchantId}`,
            amountBaseUnits: BigInt(charge.amountBaseUnits),
          },
        ],
        p.paidAt,
      ),
      outboxEvent("charge.succeeded", charge.merchantId, data, p.paidAt),
    ],
    audit: [
      chargeAudit(
        "charge.paid",
        charge,
        { reference: p.transaction, agentId: null, at: p.paidAt },
        { method: "x402", network: p.network, payer: p.payer, description: charge.description },
      ),
    ],
  };
}

/** A stablecoin Transfer to an agent's deposit address, as the watcher read it from the chain. */
export interface DepositTransfer {
  network: string;
  txHash: string;
  logIndex: number;
  blockNumber: number;
  agentId: string;
  address: string;
  sender: string;
  /** Token base units as a decimal string. */
  value: string;
}

export interface DepositCredit extends DepositTransfer {
  depositId: string;
  amountMinor: number;
  createdAt: string;
}

/**
 * An on-chain deposit to an agent's address: the deposit row (unique per
 * transaction and log) and the credit land together, so a transfer is
 * credited exactly once however many times the watcher sees it.
 */
export function depositPlan(d: DepositCredit, credit: boolean): CommitPlan {
  const record = sqlStatement(
    `INSERT INTO deposits (id, network, tx_hash, log_index, block_number, agent_id, address, sender, value, amount_minor, status, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    d.depositId,
    d.network,
    d.txHash,
    d.logIndex,
    d.blockNumber,
    d.agentId,
    d.address,
    d.sender,
    d.value,
    d.amountMinor,
    credit ? "credited" : "blocked",
    d.createdAt,
  );
  const seen = guard(
    "deposit_already_recorded",
    "NOT EXISTS (SELECT 1 FROM deposits WHERE network = ? AND tx_hash = ? AND log_index = ?)",
    d.network,
    d.txHash,
    d.logIndex,
  );
  if (!credit || d.amountMinor <= 0) return { statements: [seen, record], audit: [] };
  const data = {
    agentId: d.agentId,
    amount: d.amountMinor,
    amountMinor: d.amountMinor,
    network: d.network,
    address: d.address,
    txHash: d.txHash,
    sender: d.sender,
  };
  return {
    statements: [
      seen,
      record,
      ...postingStatements(
        `${d.txHash}:${d.logIndex}`,
        [centsPosting(`external:deposits:${d.network}`, `agent:${d.agentId}`, d.amountMinor)],
        d.createdAt,
      ),
      outboxEvent("deposit.confirmed", null, data, d.createdAt),
    ],
    audit: [
      {
        type: "deposit.confirmed",
        reference: `${d.txHash}:${d.logIndex}`,
        chargeId: null,
        agentId: d.agentId,
        merchantId: null,
        amountMinor: d.amountMinor,
        currency: "USD",
        data: { network: d.network, address: d.address, sender: d.sender, value: d.value, blockNumber: d.blockNumber },
        createdAt: d.createdAt,
      },
    ],
  };
}
