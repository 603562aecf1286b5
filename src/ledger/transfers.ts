import { guard, guards, type SqlStatement, sqlStatement } from "../db/statements";
import { INSUFFICIENT_BALANCE } from "../lib/error-codes";
import {
  agentNotFrozenCheck,
  chargeAudit,
  chargePaidStatements,
  type PayableCharge,
  payableChecks,
  paymentEventData,
} from "./movements";
import { outboxEvents } from "./outbox";
import type { CommitPlan } from "./plan";
import { centsPosting, postingStatements } from "./postings";

/*
 * Money between two ledger shards: a two-phase transfer through transit accounts (docs/decisions.md,
 * "Ledger shards"). Each phase is one batch on one shard whose entries sum to zero. A wallet
 * `payment` whose agent lives in shard A and whose charge in shard B ≠ A:
 *   P1 send (A):     agent → transit:B, the transfer row `pending`
 *   P2 arrival (B):  transit:A → merchant, the charge paid, the arrival `applied`; or
 *   P2′ refusal (B): the arrival `refused`, nothing moves
 *   P3 (A):          `completed`; or `reversed`, transit:B → agent
 * A `refund` of such a payment goes the other way, sent from the charge's shard B to the agent's A:
 *   P1 send (B):     the refund itself (refund row, the charge's refunded sum, its event and answer),
 *                    merchant → transit:A, the transfer row `pending`
 *   P2 arrival (A):  transit:B → agent, the arrival `applied` (never refused: see refundArrivalPlan)
 *   P3 (B):          `completed`
 * The sending side's row keeps the fields the arrival is built from, by kind; every driver rebuilds
 * the same plan from them (`arrivalOf`).
 */

/** What a transfer between shards carries. */
export type TransferKind = "payment" | "refund";

/** A transfer pending this long lost its driver (its wallet's turn and alarm): the recovery cron may drive it. */
export const TRANSFER_ABANDONED_MS = 60_000;

/** The fields of a transfer row (on the sending shard) the arrival is rebuilt from. */
export interface TransferRecord {
  id: string;
  kind: TransferKind;
  fromShard: number;
  toShard: number;
  /** The paying agent of a payment, the agent a refund goes back to. */
  agentId: string;
  merchantId: string;
  chargeId: string;
  amountMinor: number;
  currency: string;
  /** A payment's charge: its description and checkout link (null for a refund). */
  description: string | null;
  checkoutLinkId: string | null;
  createdAt: string;
  /** A payment's arrival beyond paying a stored charge; none for a plain wallet payment or a refund. */
  extras?: ArrivalExtras | null;
}

/**
 * What a payment's arrival (P2) carries beyond paying a stored charge, decided by its request in the
 * payer's turn: the statements that create the charge it pays (a checkout link's, a PayLink draw's)
 * and their guards, run first; statements on the charge's side before it is paid (a grant's guard on
 * the exact figures the draw was decided on, and their move); the payment's method and audit data.
 * They are kept with the transfer as built: recovery cannot decide them again (the grant's figures
 * have moved on), and a migration of the tables they touch waits until no transfer is pending
 * (docs/operations.md, "Ledger shards").
 */
export interface ArrivalExtras {
  method: "ledger" | "paylink";
  prelude: SqlStatement[];
  statements: SqlStatement[];
  auditData: Record<string, unknown>;
}

/**
 * The transfer row, `pending`, for a P1 batch: its primary key refuses a second send. `answer` is
 * what the sending side keeps for whoever completes it. The cron may drive it once it has been
 * pending `TRANSFER_ABANDONED_MS`.
 */
export const transferInsert = (t: TransferRecord, answer: string | null): SqlStatement =>
  sqlStatement(
    `INSERT INTO ledger_transfers (id, kind, to_shard, agent_id, merchant_id, charge_id, amount_minor, currency, description,
       checkout_link_id, answer, arrival_extras, status, created_at, decided_at, attempts, next_attempt_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, NULL, 0, ?)`,
    t.id,
    t.kind,
    t.toShard,
    t.agentId,
    t.merchantId,
    t.chargeId,
    t.amountMinor,
    t.currency,
    t.description,
    t.checkoutLinkId,
    answer,
    t.extras ? JSON.stringify(t.extras) : null,
    t.createdAt,
    new Date(Date.parse(t.createdAt) + TRANSFER_ABANDONED_MS).toISOString(),
  );

/** The receiving shard's plan of a transfer, rebuilt from its row by kind. */
export function arrivalOf(t: TransferRecord): CommitPlan {
  if (t.kind === "refund") return refundArrivalPlan(t);
  return arrivalPlan(paymentOf(t), t.extras ?? undefined);
}

/** The payment a `payment` transfer row records. */
const paymentOf = (t: TransferRecord): CrossShardPayment => ({
  charge: {
    id: t.chargeId,
    merchantId: t.merchantId,
    amountMinor: t.amountMinor,
    // A transfer row holds whole cents: sendPlan takes no other amount.
    amountBaseUnits: t.amountMinor * 10_000,
    currency: t.currency,
    description: t.description,
    checkoutLinkId: t.checkoutLinkId,
  },
  agentId: t.agentId,
  fromShard: t.fromShard,
  toShard: t.toShard,
  reference: t.id,
  paidAt: t.createdAt,
});

/** The guard every arrival opens with: one decision per transfer id on the receiving shard. */
const notArrived = (id: string) =>
  guard(TRANSFER_ALREADY_ARRIVED, "NOT EXISTS (SELECT 1 FROM ledger_arrivals WHERE id = ?)", id);

/**
 * P2 of a refund, on the agent's shard: transit:<charge's shard> → the agent, and the arrival
 * `applied`. Nothing in it can refuse but its own decision: a credit only raises a balance, the
 * agent's home row exists from the agent's creation (the directory places it there and never moves
 * it), and a freeze stops money leaving an agent, not reaching it (a refund within one shard
 * credits a frozen agent too). The refund was decided and answered in P1, so its arrival is owed:
 * a refusal would be a fault to repair, and the transfer stays pending (the driver logs it) rather
 * than undoing a refund the merchant was told about.
 */
export function refundArrivalPlan(t: TransferRecord): CommitPlan {
  return {
    statements: [
      notArrived(t.id),
      ...postingStatements(
        t.id,
        [centsPosting(`transit:${t.fromShard}`, `agent:${t.agentId}`, t.amountMinor)],
        t.createdAt,
      ),
      arrivalApplied(t.id, t.fromShard, `agent:${t.agentId}`, t.createdAt),
    ],
    // The agent's chain records the money it received; the merchant's has the refund's `charge.refunded`.
    audit: [
      chargeAudit(
        "transfer.received",
        { id: t.chargeId, merchantId: t.merchantId, amountMinor: t.amountMinor, currency: t.currency },
        { reference: t.id, agentId: t.agentId, at: t.createdAt },
        { kind: t.kind, refundId: t.id, fromShard: t.fromShard },
      ),
    ],
  };
}

/**
 * The receiving shard's decision that transfer `id` arrived, with the credited account's balance
 * after it (a payment's answer, given later by recovery, carries the merchant's).
 */
function arrivalApplied(id: string, fromShard: number, credited: `agent:${string}` | `merchant:${string}`, at: string) {
  const [kind, ownerId] = credited.split(":") as ["agent" | "merchant", string];
  return sqlStatement(
    `INSERT INTO ledger_arrivals (id, from_shard, outcome, reason, balance_after, created_at)
     VALUES (?, ?, 'applied', NULL, (SELECT balance_minor FROM ${kind === "agent" ? "agents" : "merchants"} WHERE id = ?), ?)`,
    id,
    fromShard,
    ownerId,
    at,
  );
}

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

/**
 * P2: the charge's side of the payment, as a same-shard payment writes it, credited from transit:A;
 * with `extras`, the charge born first (after the one-decision guard, so a second arrival is refused
 * before it meets the charge it created) and the grant's statements before it is paid.
 */
export function arrivalPlan(p: CrossShardPayment, extras?: ArrivalExtras): CommitPlan {
  const { charge } = p;
  const method = extras?.method ?? "ledger";
  const prelude = extras?.prelude ?? [];
  const data = paymentEventData(charge, p.agentId, method, p.reference);
  return {
    statements: [
      notArrived(p.reference),
      ...prelude,
      guards(...payableChecks(charge)),
      ...(extras?.statements ?? []),
      ...chargePaidStatements(charge, p.agentId, method, p.reference, p.paidAt, prelude.length > 0),
      ...postingStatements(
        p.reference,
        [centsPosting(`transit:${p.fromShard}`, `merchant:${charge.merchantId}`, charge.amountMinor)],
        p.paidAt,
      ),
      arrivalApplied(p.reference, p.fromShard, `merchant:${charge.merchantId}`, p.paidAt),
      outboxEvents(charge.merchantId, data, p.paidAt, "payment.succeeded", "charge.succeeded"),
    ],
    // The same row a same-shard payment writes: the merchant's chain does not depend on where the agent lives.
    audit: [
      chargeAudit(
        "charge.paid",
        charge,
        { reference: p.reference, agentId: p.agentId, at: p.paidAt },
        { method, description: charge.description, ...extras?.auditData },
      ),
    ],
  };
}

/**
 * P1: the agent's side: its guards (not frozen, enough balance), the transfer row (its primary key
 * refuses a second send) and the debit into transit. `answer` is what the request is to be answered
 * (its charge as paid, and with a key its slot), kept so whoever completes the transfer can store
 * it. `answerGuard` is the request's reservation check, so a send whose request already gave up
 * (and freed its key) does not land.
 */
export function sendPlan(
  p: CrossShardPayment,
  answerGuard: SqlStatement[],
  answer: string,
  extras?: ArrivalExtras,
): CommitPlan {
  const { charge } = p;
  // ledger_transfers counts whole cents; a payment across shards of an amount below or between
  // cents needs its base units carried there first. commitAcrossShards refuses one before this.
  if (charge.amountBaseUnits !== charge.amountMinor * 10_000)
    throw new Error(`a payment across shards moves whole cents: ${charge.amountBaseUnits} base units`);
  return {
    statements: [
      guards(agentNotFrozenCheck(p.agentId), [
        INSUFFICIENT_BALANCE,
        "EXISTS (SELECT 1 FROM agents WHERE id = ? AND balance_minor >= ?)",
        p.agentId,
        charge.amountMinor,
      ]),
      ...answerGuard,
      transferInsert(
        {
          id: p.reference,
          kind: "payment",
          fromShard: p.fromShard,
          toShard: p.toShard,
          agentId: p.agentId,
          merchantId: charge.merchantId,
          chargeId: charge.id,
          amountMinor: charge.amountMinor,
          currency: charge.currency,
          description: charge.description,
          checkoutLinkId: charge.checkoutLinkId,
          createdAt: p.paidAt,
          extras,
        },
        answer,
      ),
      ...postingStatements(
        p.reference,
        [centsPosting(`agent:${p.agentId}`, `transit:${p.toShard}`, charge.amountMinor)],
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

export type PendingTransfer = Pick<
  TransferRecord,
  "id" | "toShard" | "agentId" | "merchantId" | "chargeId" | "amountMinor" | "currency"
>;

/** P3 after a refused arrival of a payment: the money comes back from transit to the agent. */
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
      [centsPosting(`transit:${t.toShard}`, `agent:${t.agentId}`, t.amountMinor)],
      at,
    ),
  ],
  audit: [
    chargeAudit(
      "transfer.reversed",
      { id: t.chargeId, merchantId: t.merchantId, amountMinor: t.amountMinor, currency: t.currency },
      { reference: `${t.id}:reversal`, agentId: t.agentId, at },
      { transferId: t.id, toShard: t.toShard, reason },
    ),
  ],
});
