import type { Env } from "../config/env";
import { type IdempotencySlot, PENDING_FIGURE, storeIfHeldStatement } from "../db/idempotency";
import { type FaultContext, faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import type { CommitResult } from "./ledger.do";
import { type Place, placeAt } from "./place";
import type { CommitPlan } from "./plan";
import {
  type ArrivalExtras,
  arrivalOf,
  arrivalRefusedPlan,
  completePlan,
  reversePlan,
  TRANSFER_ALREADY_ARRIVED,
  type TransferRecord,
} from "./transfers";

/*
 * Drives a transfer between two ledger shards (a wallet payment, or its refund) from its send to its
 * end: the receiving shard's one decision, then the sending side's completion or reversal. The plans
 * are built in transfers.ts; the entry that sends them is move.ts. Whoever drives (the paying turn,
 * the wallet's alarm, the recovery cron, a retry under the same key) ends in the one outcome.
 */

/**
 * What the sending side keeps of the request a payment answers, as the paying domain gave it: its
 * charge as paid and, with a key, the slot and the 200 body, the merchant's balance after the payment
 * (`"merchantBalanceMinor":PENDING_FIGURE`) still to be written in.
 */
export interface KeptAnswer {
  charge: unknown;
  slot?: IdempotencySlot;
  template?: string;
}

interface TransferRow extends Omit<TransferRecord, "fromShard" | "extras"> {
  status: "pending" | "completed" | "reversed";
  answer: string | null;
  arrivalExtras: string | null;
}

/** How a transfer stands once driven as far as it can go now. */
export type TransferState =
  | { status: "absent" }
  | { status: "pending" }
  | { status: "completed"; merchantBalanceMinor: number; answer: KeptAnswer }
  | { status: "reversed"; reason: string };

/** The sending side's place of a transfer: a Place, or its shard's number (within src/ledger). */
export type TransferFrom = Place | number;

const placeOf = (env: Env, at: TransferFrom): Place => (typeof at === "number" ? placeAt(env, at) : at);

export const readTransfer = (at: Place, id: string) =>
  at.db
    .prepare(
      `SELECT id, kind, to_shard AS toShard, agent_id AS agentId, merchant_id AS merchantId, charge_id AS chargeId,
         amount_minor AS amountMinor, currency, description, checkout_link_id AS checkoutLinkId, created_at AS createdAt,
         status, answer, arrival_extras AS arrivalExtras FROM ledger_transfers WHERE id = ?`,
    )
    .bind(id)
    .first<TransferRow>();

const readArrival = (at: Place, id: string) =>
  at.db
    .prepare("SELECT outcome, reason, balance_after AS balanceAfter FROM ledger_arrivals WHERE id = ?")
    .bind(id)
    .first<{ outcome: "applied" | "refused"; reason: string | null; balanceAfter: number | null }>();

/** Commits a phase; a failure is logged and answered undefined: whether it landed is read back from its row. */
export const commitOrNothing = async (at: Place, plan: CommitPlan): Promise<CommitResult | undefined> => {
  try {
    return await at.commit(plan);
  } catch (error) {
    // A phase that keeps failing shows here.
    log.warn("transfer_phase", { shard: at.shard, error });
    return undefined;
  }
};

const FIGURE = `"merchantBalanceMinor":${PENDING_FIGURE}`;

/** A kept answer's 200 body with the merchant's balance after the payment written in. */
export const answerBody = (template: string, merchantBalanceMinor: number) =>
  template.replace(FIGURE, `"merchantBalanceMinor":${merchantBalanceMinor}`);

/**
 * Drives transfer `id` (sent from `from`, a payment or a refund) as far as it can go: the receiving
 * shard decides once (P2, or P2′ when a payment's arrival is refused), then the sending side
 * completes or reverses it (P3). Idempotent: every phase is guarded by the decision before it, so
 * any number of drivers end in one outcome. A phase that fails leaves the transfer pending for the
 * next driver.
 */
export async function driveTransfer(
  env: Env,
  from: TransferFrom,
  id: string,
  context: FaultContext = {},
): Promise<TransferState> {
  const sender = placeOf(env, from);
  const t = await readTransfer(sender, id);
  if (!t) return { status: "absent" };
  if (t.status === "pending") {
    const arrival = await arrive(env, sender, t, context);
    if (!arrival) return { status: "pending" };
    faultPoint("transfer.before_settle", context);
    // A refund's answer was stored with the refund itself, in P1.
    const answer = t.kind === "payment" ? (JSON.parse(t.answer ?? "null") as KeptAnswer | null) : null;
    const at = nowIso();
    const settle =
      arrival.outcome === "applied"
        ? completePlan(id, at, answerStatements(answer, arrival.balanceAfter ?? 0))
        : reversePlan(t, arrival.reason ?? "refused", at);
    // A refusal here (transfer_not_pending) means another driver settled it; the row says how.
    await commitOrNothing(sender, settle);
  }
  return settledState(env, sender, id);
}

/** The receiving shard's decision on a pending transfer, made now if it has none yet (null: still undecided). */
async function arrive(env: Env, sender: Place, t: TransferRow, context: FaultContext) {
  const receiver = placeAt(env, t.toShard);
  const decided = await readArrival(receiver, t.id);
  if (decided) return decided;
  const extras = t.arrivalExtras ? (JSON.parse(t.arrivalExtras) as ArrivalExtras) : null;
  const arrived = await commitOrNothing(receiver, arrivalOf({ ...t, fromShard: sender.shard, extras }));
  faultPoint("transfer.after_arrive", context);
  if (arrived?.kind === "refused" && arrived.reason !== TRANSFER_ALREADY_ARRIVED && t.kind === "refund") {
    // A refund's arrival has nothing to refuse it (see refundArrivalPlan): a fault to repair, not an outcome.
    log.error("refund_arrival_refused", { id: t.id, from: sender.shard, to: t.toShard, reason: arrived.reason });
    return null;
  }
  if (arrived?.kind === "refused" && arrived.reason !== TRANSFER_ALREADY_ARRIVED) {
    // The refusal is recorded unless a concurrent driver's arrival got there first: the row decides.
    await commitOrNothing(receiver, arrivalRefusedPlan(t.id, sender.shard, arrived.reason, nowIso()));
    faultPoint("transfer.after_refusal", context);
  }
  return readArrival(receiver, t.id);
}

/** How a transfer stands, without driving it. */
export async function settledState(env: Env, from: TransferFrom, id: string): Promise<TransferState> {
  const sender = placeOf(env, from);
  const t = await readTransfer(sender, id);
  if (!t) return { status: "absent" };
  if (t.status === "pending") return { status: "pending" };
  const arrival = await readArrival(placeAt(env, t.toShard), id);
  if (t.status === "reversed") return { status: "reversed", reason: arrival?.reason ?? "refused" };
  return {
    status: "completed",
    merchantBalanceMinor: arrival?.balanceAfter ?? 0,
    answer: JSON.parse(t.answer ?? "null") as KeptAnswer,
  };
}

/** The request's 200, stored under its key if the request still holds it (none without a key). */
function answerStatements(answer: KeptAnswer | null, merchantBalanceMinor: number) {
  if (!answer?.slot || !answer.template) return [];
  return [storeIfHeldStatement(answer.slot, 200, answerBody(answer.template, merchantBalanceMinor))];
}
