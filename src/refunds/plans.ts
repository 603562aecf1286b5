import type { Hex } from "viem";
import { addRefunded, chargePaidTo, refundedFigure, subtractRefunded } from "../charges/statements";
import type { X402Settings } from "../config/env";
import { PENDING_FIGURE } from "../db/idempotency";
import { guard, type SqlStatement, sqlStatement } from "../db/statements";
import type { AuditDraft } from "../ledger/chain";
import type { ChargeRefund } from "../ledger/move";
import { type EventType, outboxEventWithFigure } from "../ledger/outbox";
import type { Place } from "../ledger/place";
import type { CommitPlan } from "../ledger/plan";
import { type Account, postingStatements } from "../ledger/postings";
import { centsIfWhole } from "../lib/money";
import { merchantBaseUnitsAtLeast } from "../merchants/statements";
import { type Advance, outboundOutcomeStatements } from "../outbound/advance";
import { type OutboundTransfer, settlementTransfer } from "../outbound/authorization";

export interface RefundRow {
  id: string;
  chargeId: string;
  merchantId: string;
  agentId: string | null;
  /** The whole cents of `amountBaseUnits`, rounded down, as stored. */
  amountMinor: number;
  /** The exact amount in the token's base units. */
  amountBaseUnits: number;
  currency: string;
  method: string;
  /** The payer's address, for an x402 refund. */
  destination: string | null;
  status: "pending" | "succeeded" | "failed";
  txHash: string | null;
  failureReason: string | null;
  createdAt: string;
  /** Not stored: the console user who refunded for the merchant, named in the refund's first audit row. */
  by?: string;
}

/** Where an on-chain refund sits in the ledger once it left the merchant: outside the service. */
export const refundsAccount = (x: X402Settings): Account => `external:refunds:${x.network}`;

/** The audit row of a refund step. */
const auditOf = (r: RefundRow, type: string, data: Record<string, unknown>, at: string): AuditDraft => ({
  type,
  reference: r.id,
  chargeId: r.chargeId,
  agentId: r.agentId,
  merchantId: r.merchantId,
  amountMinor: centsIfWhole(BigInt(r.amountBaseUnits)),
  amountBaseUnits: String(r.amountBaseUnits),
  currency: r.currency,
  data: { refundId: r.id, method: r.method, ...(r.by ? { by: r.by } : {}), ...data },
  createdAt: at,
});

/**
 * The guards and writes every refund opens with: the charge is still a paid charge of this
 * merchant, its refunded sum grows by the amount (the table's trigger aborts the batch with
 * `refund_exceeds_remaining` past the charge's amount) and answers with the sum after, and the
 * merchant's balance covers the amount. Concurrent refunds and payouts are decided here, in order.
 */
function openingStatements(r: RefundRow): SqlStatement[] {
  return [
    guard(...chargePaidTo(r.chargeId, r.merchantId)),
    sqlStatement(
      `INSERT INTO refunds (id, charge_id, merchant_id, agent_id, amount_minor, amount_base_units, currency, method, destination, status, tx_hash, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`,
      r.id,
      r.chargeId,
      r.merchantId,
      r.agentId,
      r.amountMinor,
      r.amountBaseUnits,
      r.currency,
      r.method,
      r.destination,
      r.status,
      r.createdAt,
      r.createdAt,
    ),
    addRefunded(r.chargeId, r.amountBaseUnits, REFUNDED_AFTER),
    guard(...merchantBaseUnitsAtLeast(r.merchantId, r.amountBaseUnits)),
  ];
}

/** The column name the charge update answers with; read back with `refundedAfter`. */
const REFUNDED_AFTER = "refundedMinorAfterRefund";

/** The charge's refunded sum right after a committed refund plan, from its own answer: cents and base units. */
export function refundedAfter(results: Record<string, unknown>[][]): {
  refundedMinor: number;
  refundedBaseUnits: number;
} {
  const row = results.flat().find((r) => REFUNDED_AFTER in r);
  if (!row) throw new Error("the refund plan's charge update answered nothing");
  return {
    refundedMinor: Number(row[REFUNDED_AFTER]),
    refundedBaseUnits: Number(row[`${REFUNDED_AFTER}BaseUnits`]),
  };
}

/**
 * What `charge.refunded` and `refund.failed` carry; `refundedMinor` and `refundedBaseUnits` are filled
 * in by the batch (`refundEvent`). `amountMinor` is null for an amount that is not whole cents.
 */
const refundEventData = (r: RefundRow, transaction: string | null) => ({
  refundId: r.id,
  chargeId: r.chargeId,
  merchantId: r.merchantId,
  agentId: r.agentId,
  amountMinor: centsIfWhole(BigInt(r.amountBaseUnits)),
  amountBaseUnits: String(r.amountBaseUnits),
  refundedMinor: PENDING_FIGURE,
  currency: r.currency,
  method: r.method,
  transaction,
});

/**
 * A refund's webhook event. `refundedMinor` (and `refundedBaseUnits` after it, see refundedFigure)
 * is the charge's sum as the batch leaves it, which
 * concurrent refunds make unknowable beforehand: the statement writes it in from the charge row,
 * as stored Idempotency answers do (see storeTemplateStatements). It must follow the plan's
 * charge update.
 */
function refundEvent(type: EventType, r: RefundRow, data: Record<string, unknown>, at: string): SqlStatement {
  return outboxEventWithFigure(type, r.merchantId, data, at, {
    field: "refundedMinor",
    placeholder: PENDING_FIGURE,
    ...refundedFigure(r.chargeId),
  });
}

/**
 * A refund of a wallet payment (`ledger` or `paylink`), the money back to the paying agent's wallet,
 * as the ledger's entry moves it (moveMoney): the refund `succeeded`, `charge.refunded` and its
 * audit row on the charge's side; the ledger adds the money's movement between the opening and the
 * event, in one batch or, with the agent elsewhere, as the send of a transfer toward it.
 * `answer`: the statements that store the request's answer, if it has a key.
 */
export function walletRefund(r: RefundRow & { agentId: string }, answer: SqlStatement[]): ChargeRefund {
  return {
    kind: "refund",
    id: r.id,
    agentId: r.agentId,
    charge: { id: r.chargeId, merchantId: r.merchantId, currency: r.currency },
    amountBaseUnits: BigInt(r.amountBaseUnits),
    at: r.createdAt,
    statements: openingStatements(r),
    after: [refundEvent("charge.refunded", r, refundEventData(r, null), r.createdAt), ...answer],
    audit: [auditOf(r, "charge.refunded", {}, r.createdAt)],
  };
}

/**
 * An x402 refund taken: the merchant debited at once, the refund `pending`, and the transfer that
 * sends it back to the payer from the settlement address, recorded to be sent after the batch (in
 * the charge's database, `at`).
 */
export function x402RefundPlan(
  x: X402Settings,
  at: Place,
  r: RefundRow & { destination: string },
  answer: SqlStatement[],
): CommitPlan {
  const transfer = settlementTransfer(x, {
    at,
    purpose: "refund",
    ownerId: r.id,
    to: r.destination as Hex,
    amountBaseUnits: BigInt(r.amountBaseUnits),
    createdAt: r.createdAt,
  });
  return {
    statements: [
      ...openingStatements(r),
      transfer.statement,
      ...postingStatements(
        r.id,
        [{ from: `merchant:${r.merchantId}`, to: refundsAccount(x), amountBaseUnits: BigInt(r.amountBaseUnits) }],
        r.createdAt,
      ),
      ...answer,
    ],
    audit: [auditOf(r, "refund.created", { destination: r.destination, network: x.network }, r.createdAt)],
  };
}

/**
 * Records an x402 refund's decided transfer, once (the batch requires the transfer still pending):
 * `succeeded` with its transaction and `charge.refunded`; or `failed`, the charge's refunded sum
 * lowered again and the amount back in the merchant's balance by a reversing posting, with
 * `refund.failed`. The audit row either way.
 */
export function refundOutcomePlan(
  x: X402Settings,
  t: OutboundTransfer,
  r: RefundRow,
  outcome: Exclude<Advance, { kind: "waiting" }>,
  at: string,
): CommitPlan {
  const decided = outboundOutcomeStatements(t, outcome, at);
  if (outcome.kind === "confirmed") {
    return {
      statements: [
        ...decided,
        sqlStatement(
          "UPDATE refunds SET status = 'succeeded', tx_hash = ?, updated_at = ? WHERE id = ? AND status = 'pending'",
          outcome.transaction,
          at,
          r.id,
        ),
        refundEvent("charge.refunded", r, refundEventData(r, outcome.transaction), at),
      ],
      audit: [auditOf(r, "charge.refunded", { transaction: outcome.transaction, destination: r.destination }, at)],
    };
  }
  const failureReason = outcome.reason.slice(0, 300);
  return {
    statements: [
      ...decided,
      sqlStatement(
        "UPDATE refunds SET status = 'failed', failure_reason = ?, updated_at = ? WHERE id = ? AND status = 'pending'",
        failureReason,
        at,
        r.id,
      ),
      subtractRefunded(r.chargeId, r.amountBaseUnits),
      // The debit stays; a new posting gives the amount back.
      ...postingStatements(
        `${r.id}:reversal`,
        [{ from: refundsAccount(x), to: `merchant:${r.merchantId}`, amountBaseUnits: BigInt(r.amountBaseUnits) }],
        at,
      ),
      refundEvent("refund.failed", r, { ...refundEventData(r, null), failureReason }, at),
    ],
    audit: [auditOf(r, "refund.failed", { failureReason, destination: r.destination }, at)],
  };
}
