import type { Env } from "../config/env";
import { chargeView, type ChargeView } from "../charges/service";
import { dbOfShard } from "../db/shards";
import {
  PENDING_FIGURE,
  reservationHeldStatement,
  storeIfHeldStatement,
  type IdempotencySlot,
} from "../db/idempotency";
import { ledgerOf, type CommitResult } from "../ledger/ledger.do";
import { AGENT_FROZEN } from "../ledger/movements";
import type { CommitPlan } from "../ledger/plan";
import {
  arrivalOf,
  type ArrivalExtras,
  arrivalRefusedPlan,
  completePlan,
  reversePlan,
  sendPlan,
  TRANSFER_ALREADY_ARRIVED,
  type CrossShardPayment,
  type TransferRecord,
} from "../ledger/transfers";
import type { SqlStatement } from "../db/statements";
import { codeWith } from "../lib/error-codes";
import { faultPoint, type FaultContext } from "../lib/faults";
import { newId } from "../lib/ids";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { paidBody, type PaidView, type PayOutcome } from "./outcomes";
import { POLICY_REASONS } from "./policy";
import type { PayableSnapshot, WalletTurnCall } from "./wallet-state";

/*
 * Money between an agent (shard A) and a charge (shard B) living in different ledger shards: a
 * wallet payment (sent from A) or its refund (sent from B). The phases are built in
 * ledger/transfers.ts; this drives them, in the agent's wallet object (its turn, or its alarm and
 * the minute cron for a transfer a crash left pending).
 */

/** What the sending side keeps of the request a transfer answers: its charge as paid and, with a key, the slot and answer. */
interface TransferAnswer {
  charge: ChargeView;
  slot?: IdempotencySlot;
  /** The 200 body, with the merchant's balance after the payment still to be written in. */
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
  | { status: "completed"; merchantBalanceMinor: number; answer: TransferAnswer }
  | { status: "reversed"; reason: string };

const readTransfer = (env: Env, shard: number, id: string) =>
  dbOfShard(env, shard)
    .prepare(
      `SELECT id, kind, to_shard AS toShard, agent_id AS agentId, merchant_id AS merchantId, charge_id AS chargeId,
         amount_minor AS amountMinor, currency, description, checkout_link_id AS checkoutLinkId, created_at AS createdAt,
         status, answer, arrival_extras AS arrivalExtras FROM ledger_transfers WHERE id = ?`,
    )
    .bind(id)
    .first<TransferRow>();

const readArrival = (env: Env, shard: number, id: string) =>
  dbOfShard(env, shard)
    .prepare("SELECT outcome, reason, balance_after AS balanceAfter FROM ledger_arrivals WHERE id = ?")
    .bind(id)
    .first<{ outcome: "applied" | "refused"; reason: string | null; balanceAfter: number | null }>();

const commitOrNothing = async (env: Env, shard: number, plan: CommitPlan): Promise<CommitResult | undefined> => {
  try {
    return await ledgerOf(env, shard).commit(plan);
  } catch (error) {
    // Whether it landed is read back from the row it writes; a phase that keeps failing shows here.
    log.warn("transfer_phase", { shard, error });
    return undefined;
  }
};

const FIGURE = `"merchantBalanceMinor":${PENDING_FIGURE}`;

/**
 * Drives transfer `id` (sent from shard `from`, a payment or a refund) as far as it can go: the
 * receiving shard decides once (P2, or P2′ when a payment's arrival is refused), then the sending
 * side completes or reverses it (P3). Idempotent: every phase is guarded by the decision before
 * it, so any number of drivers end in one outcome. A phase that fails leaves the transfer pending
 * for the next driver.
 */
export async function driveTransfer(
  env: Env,
  from: number,
  id: string,
  context: FaultContext = {},
): Promise<TransferState> {
  const t = await readTransfer(env, from, id);
  if (!t) return { status: "absent" };
  const to = t.toShard;
  if (t.status === "pending") {
    let arrival = await readArrival(env, to, id);
    if (!arrival) {
      const arrived = await commitOrNothing(
        env,
        to,
        arrivalOf({
          ...t,
          fromShard: from,
          extras: t.arrivalExtras ? (JSON.parse(t.arrivalExtras) as ArrivalExtras) : null,
        }),
      );
      faultPoint("transfer.after_arrive", context);
      if (arrived?.kind === "refused" && arrived.reason !== TRANSFER_ALREADY_ARRIVED && t.kind === "refund") {
        // A refund's arrival has nothing to refuse it (see refundArrivalPlan): a fault to repair, not an outcome.
        log.error("refund_arrival_refused", { id, from, to, reason: arrived.reason });
        return { status: "pending" };
      }
      if (arrived?.kind === "refused" && arrived.reason !== TRANSFER_ALREADY_ARRIVED) {
        // The refusal is recorded unless a concurrent driver's arrival got there first: the row decides.
        await commitOrNothing(env, to, arrivalRefusedPlan(id, from, arrived.reason, nowIso()));
        faultPoint("transfer.after_refusal", context);
      }
      arrival = await readArrival(env, to, id);
      if (!arrival) return { status: "pending" };
    }
    faultPoint("transfer.before_settle", context);
    // A refund's answer was stored with the refund itself, in P1.
    const answer = t.kind === "payment" ? (JSON.parse(t.answer ?? "null") as TransferAnswer | null) : null;
    const at = nowIso();
    const settle =
      arrival.outcome === "applied"
        ? completePlan(id, at, answerStatements(answer, arrival.balanceAfter ?? 0))
        : reversePlan(t, arrival.reason ?? "refused", at);
    // A refusal here (transfer_not_pending) means another driver settled it; the row says how.
    await commitOrNothing(env, from, settle);
  }
  return settledState(env, from, id);
}

async function settledState(env: Env, from: number, id: string): Promise<TransferState> {
  const t = await readTransfer(env, from, id);
  if (!t) return { status: "absent" };
  if (t.status === "pending") return { status: "pending" };
  const arrival = await readArrival(env, t.toShard, id);
  if (t.status === "reversed") return { status: "reversed", reason: arrival?.reason ?? "refused" };
  return {
    status: "completed",
    merchantBalanceMinor: arrival?.balanceAfter ?? 0,
    answer: JSON.parse(t.answer ?? "null") as TransferAnswer,
  };
}

/** The request's 200, stored under its key if the request still holds it (none without a key). */
function answerStatements(answer: TransferAnswer | null, merchantBalanceMinor: number) {
  if (!answer?.slot || !answer.template) return [];
  const body = answer.template.replace(FIGURE, `"merchantBalanceMinor":${merchantBalanceMinor}`);
  return [storeIfHeldStatement(answer.slot, 200, body)];
}

/** Remembers a transfer in flight in the wallet object, so its alarm drives it if this turn does not finish. */
export interface TransferIntents {
  remember(id: string, from: number): Promise<void>;
  done(id: string): Promise<void>;
}

/** What a payment across shards carries beyond paying a stored charge (see ArrivalExtras). */
export interface CrossShardExtras {
  arrival?: ArrivalExtras;
  /** Statements on the agent's shard, in the send (P1): an approval's guard and its flip to granted. */
  payerStatements?: SqlStatement[];
}

/** A refusal's reason as a 409 when it is one, else as given (a grant's own `paylink_grant_changed`). */
const conflictReason = (reason: string) => {
  try {
    return codeWith(409, reason);
  } catch {
    return reason as ReturnType<typeof codeWith<409>>;
  }
};

/**
 * Pays a charge in shard `to` from the agent's wallet in shard `from`: P1, then P2 and P3 inline,
 * answering exactly as a same-shard payment does (paid, or the same 402/403/409). The turn is kept
 * until the transfer is decided, so the agent's next decision sees its outcome. `extras` carry a
 * charge born with its payment, a grant's statements and an approval's (see CrossShardExtras).
 */
export async function commitAcrossShards(
  { env, agentId, turn, slot }: WalletTurnCall,
  charge: PayableSnapshot,
  view: PaidView,
  { from, to }: { from: number; to: number },
  extras: CrossShardExtras = {},
): Promise<PayOutcome> {
  const paidAt = nowIso();
  const reference = newId("payment", { shard: from });
  const method = extras.arrival?.method ?? "ledger";
  const paidCharge = chargeView({ ...charge, status: "paid", agentId, method, reference, paidAt });
  const payment: CrossShardPayment = { charge, agentId, fromShard: from, toShard: to, reference, paidAt };
  const answer: TransferAnswer = slot
    ? {
        charge: paidCharge,
        slot,
        template: JSON.stringify(paidBody(view, { charge: paidCharge, merchantBalanceMinor: PENDING_FIGURE })),
      }
    : { charge: paidCharge };
  const context = { abort: turn.abort };
  const end = turn.cache.hold(charge.amountMinor);
  let ended = false;
  const finish = (how: Parameters<typeof end>[0]) => {
    if (!ended) end(how);
    ended = true;
  };
  try {
    faultPoint("payment.before_commit", context);
    await turn.intents?.remember(reference, from);
    const sent = await commitOrNothing(
      env,
      from,
      sendPlan(
        payment,
        [...(slot ? [reservationHeldStatement(slot)] : []), ...(extras.payerStatements ?? [])],
        JSON.stringify(answer),
        extras.arrival,
      ),
    );
    if (sent?.kind !== "committed") {
      const landed = await readTransfer(env, from, reference);
      if (!landed) {
        await turn.intents?.done(reference);
        if (!sent) throw new Error(`transfer ${reference}: the send did not land`);
        const balance = sent.reason === POLICY_REASONS.balance;
        const frozen = sent.reason === AGENT_FROZEN;
        finish(balance || frozen ? "unsure" : "unchanged");
        if (frozen) return { kind: "frozen" };
        return balance
          ? { kind: "rejected", reason: POLICY_REASONS.balance }
          : { kind: "conflict", reason: conflictReason(sent.reason) };
      }
    }
    faultPoint("transfer.after_send", context);
    const state = await driveTransfer(env, from, reference, context);
    if (state.status === "completed") {
      await turn.intents?.done(reference);
      finish("committed");
      return { kind: "paid", charge: paidCharge, merchantBalanceMinor: state.merchantBalanceMinor };
    }
    if (state.status === "reversed") {
      await turn.intents?.done(reference);
      finish("unsure");
      return { kind: "conflict", reason: conflictReason(state.reason) };
    }
    throw new Error(`transfer ${reference} is still pending: its recovery will finish it`);
  } finally {
    finish("unsure");
  }
}

/**
 * A refund whose charge (shard `from`) and agent live in different shards: P1 commits the refund
 * and its send into transit on `from` and decides it (its result, refused or committed, is the
 * refund's answer); then the arrival in the agent's shard and the completion are driven inline.
 * What this does not finish (a crash, a shard unreachable) is owed, not undecided: the wallet's
 * alarm (the transfer is remembered before P1) and the recovery cron finish it.
 */
export async function refundAcrossShards(
  { env, intents, context }: { env: Env; intents: TransferIntents; context: FaultContext },
  from: number,
  id: string,
  plan: CommitPlan,
): Promise<CommitResult> {
  await intents.remember(id, from);
  const sent = await ledgerOf(env, from).commit(plan);
  if (sent.kind !== "committed") {
    await intents.done(id);
    return sent;
  }
  try {
    faultPoint("transfer.after_send", context);
    const state = await driveTransfer(env, from, id, context);
    if (state.status !== "pending") await intents.done(id);
  } catch (error) {
    log.warn("refund_transfer", { id, error });
  }
  return sent;
}

/**
 * Before a cross-shard payment of `chargeId`: drives this agent's own transfers of that charge that
 * a crash left pending. A completed one made for this request (same key) answers it with its
 * payment, as its first answer would have been; `drove` says the charge may have changed since it
 * was read. A transfer still pending after that throws: a new payment (or a refusal stored under
 * the key) must not go ahead of one whose outcome recovery has yet to decide, and a 5xx frees the
 * key for a retry that finds it decided.
 */
export async function resumeTransfersOfCharge(
  { env, agentId, turn, slot }: WalletTurnCall,
  from: number,
  chargeId: string,
): Promise<{ paid: PayOutcome } | { drove: boolean }> {
  const { results } = await dbOfShard(env, from)
    .prepare(
      "SELECT id, status FROM ledger_transfers WHERE agent_id = ? AND charge_id = ? AND kind = 'payment' AND status <> 'reversed'",
    )
    .bind(agentId, chargeId)
    .all<{ id: string; status: string }>();
  if (results.length === 0) return { drove: false };
  const pending = results.some((t) => t.status === "pending");
  if (pending) turn.cache.forget();
  for (const t of results) {
    const state =
      t.status === "pending"
        ? await driveTransfer(env, from, t.id, { abort: turn.abort })
        : await settledState(env, from, t.id);
    if (state.status === "pending")
      throw new Error(`transfer ${t.id} of charge ${chargeId} is still pending: its recovery will finish it`);
    if (state.status !== "completed" || !slot) continue;
    const kept = state.answer.slot;
    if (kept?.scope === slot.scope && kept.key === slot.key)
      return { paid: { kind: "paid", charge: state.answer.charge, merchantBalanceMinor: state.merchantBalanceMinor } };
  }
  return { drove: true };
}
