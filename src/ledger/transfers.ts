import { guard, guards, sqlStatement, type SqlStatement } from "../db/statements";
import { INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { outboxEvents } from "../webhooks/outbox";
import {
  agentNotFrozenCheck,
  chargeAudit,
  chargePaidStatements,
  paymentEventData,
  payableChecks,
  type PayableCharge,
} from "./movements";
import type { CommitPlan } from "./plan";
import { postingStatements } from "./postings";

/*
 * A wallet payment whose agent lives in shard A and whose charge in shard B ≠ A: a two-phase
 * transfer through transit accounts (docs/decisions.md, "Ledger shards"). Each phase is one batch on
 * one shard whose entries sum to zero:
 *   P1 send (A):     agent → transit:B, the transfer row `pending`
 *   P2 arrival (B):  transit:A → merchant, the charge paid, the arrival `applied`; or
 *   P2′ refusal (B): the arrival `refused`, nothing moves
 *   P3 (A):          `completed`; or `reversed`, transit:B → agent
 */

/** P2 refuses once the receiving shard decided this transfer: every later attempt reads the decision. */
export const TRANSFER_ALREADY_ARRIVED = "transfer_already_arrived";
/** P3 refuses once the transfer is decided on the sending side. */
export const TRANSFER_NOT_PENDING = "transfer_not_pending";

export interface CrossShardPayment {
  charge: PayableCharge;
  agentId: string;
  /** The agent's shard (A) and the charge's (B). */
  fromShard: number;
  toShard: number;
  reference: string;
  paidAt: string;
}

/** P2: the charge's side of the payment, as a same-shard payment writes it, credited from transit:A. */
export function arrivalPlan(p: CrossShardPayment): CommitPlan {
  const { charge } = p;
  const data = paymentEventData(charge, p.agentId, "ledger", p.reference);
  return {
    statements: [
      guard(TRANSFER_ALREADY_ARRIVED, "NOT EXISTS (SELECT 1 FROM ledger_arrivals WHERE id = ?)", p.reference),
      guards(...payableChecks(charge)),
      ...chargePaidStatements(charge, p.agentId, "ledger", p.reference, p.paidAt),
      ...postingStatements(
        p.reference,
        [{ from: `transit:${p.fromShard}`, to: `merchant:${charge.merchantId}`, amountMinor: charge.amountMinor }],
        p.paidAt,
      ),
      // The merchant's balance after this payment, for an answer given later (by recovery, say).
      sqlStatement(
        `INSERT INTO ledger_arrivals (id, from_shard, outcome, reason, balance_after, created_at)
         VALUES (?, ?, 'applied', NULL, (SELECT balance_minor FROM merchants WHERE id = ?), ?)`,
        p.reference,
        p.fromShard,
        charge.merchantId,
        p.paidAt,
      ),
      outboxEvents(charge.merchantId, data, p.paidAt, "payment.succeeded", "charge.succeeded"),
    ],
    // The same row a same-shard payment writes: the merchant's chain does not depend on where the agent lives.
    audit: [
      chargeAudit(
        "charge.paid",
        charge,
        { reference: p.reference, agentId: p.agentId, at: p.paidAt },
        { method: "ledger", description: charge.description },
      ),
    ],
  };
}

/**
 * P1: the agent's side: its guards (not frozen, enough balance), the transfer row (its primary key
 * refuses a second send) and the debit into transit. `answer` is what the request is to be answered
 * (its charge as paid, and with a key its slot), kept so whoever completes the transfer can store it. `answerGuard` is the request's reservation
 * check, so a send whose request already gave up (and freed its key) does not land.
 */
export function sendPlan(
  p: CrossShardPayment,
  arrival: CommitPlan,
  answerGuard: SqlStatement[],
  answer: string,
): CommitPlan {
  const { charge } = p;
  return {
    statements: [
      guards(agentNotFrozenCheck(p.agentId), [
        INSUFFICIENT_BALANCE,
        "EXISTS (SELECT 1 FROM agents WHERE id = ? AND balance_minor >= ?)",
        p.agentId,
        charge.amountMinor,
      ]),
      ...answerGuard,
      sqlStatement(
        `INSERT INTO ledger_transfers (id, kind, to_shard, agent_id, merchant_id, charge_id, amount_minor, arrival_plan, answer, status, created_at, decided_at)
         VALUES (?, 'payment', ?, ?, ?, ?, ?, ?, ?, 'pending', ?, NULL)`,
        p.reference,
        p.toShard,
        p.agentId,
        charge.merchantId,
        charge.id,
        charge.amountMinor,
        JSON.stringify(arrival),
        answer,
        p.paidAt,
      ),
      ...postingStatements(
        p.reference,
        [{ from: `agent:${p.agentId}`, to: `transit:${p.toShard}`, amountMinor: charge.amountMinor }],
        p.paidAt,
      ),
    ],
    audit: [
      chargeAudit(
        "transfer.sent",
        charge,
        { reference: p.reference, agentId: p.agentId, at: p.paidAt },
        { toShard: p.toShard },
      ),
    ],
  };
}

/** P2′: the receiving shard's refusal, recorded unless it already decided (then the decision stands). */
export const arrivalRefusedPlan = (id: string, fromShard: number, reason: string, at: string): CommitPlan => ({
  statements: [
    sqlStatement(
      `INSERT INTO ledger_arrivals (id, from_shard, outcome, reason, balance_after, created_at)
       VALUES (?, ?, 'refused', ?, NULL, ?) ON CONFLICT (id) DO NOTHING`,
      id,
      fromShard,
      reason,
      at,
    ),
  ],
  audit: [],
});

const stillPending = (id: string) =>
  guard(TRANSFER_NOT_PENDING, "EXISTS (SELECT 1 FROM ledger_transfers WHERE id = ? AND status = 'pending')", id);

/** P3 after an applied arrival: the transfer is done; `answer` stores the request's answer if it still waits for one. */
export const completePlan = (id: string, at: string, answer: SqlStatement[]): CommitPlan => ({
  statements: [
    stillPending(id),
    sqlStatement(
      "UPDATE ledger_transfers SET status = 'completed', decided_at = ? WHERE id = ? AND status = 'pending'",
      at,
      id,
    ),
    ...answer,
  ],
  audit: [],
});

export interface PendingTransfer {
  id: string;
  toShard: number;
  agentId: string;
  merchantId: string;
  chargeId: string;
  amountMinor: number;
}

/** P3 after a refused arrival: the money comes back from transit to the agent. */
export const reversePlan = (t: PendingTransfer, reason: string, at: string): CommitPlan => ({
  statements: [
    stillPending(t.id),
    sqlStatement(
      "UPDATE ledger_transfers SET status = 'reversed', decided_at = ? WHERE id = ? AND status = 'pending'",
      at,
      t.id,
    ),
    ...postingStatements(
      `${t.id}:reversal`,
      [{ from: `transit:${t.toShard}`, to: `agent:${t.agentId}`, amountMinor: t.amountMinor }],
      at,
    ),
  ],
  audit: [
    chargeAudit(
      "transfer.reversed",
      { id: t.chargeId, merchantId: t.merchantId, amountMinor: t.amountMinor, currency: "USD" },
      { reference: `${t.id}:reversal`, agentId: t.agentId, at },
      { transferId: t.id, toShard: t.toShard, reason },
    ),
  ],
});
