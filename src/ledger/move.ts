import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import type { SqlStatement } from "../db/statements";
import { faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { centsIfWhole } from "../lib/money";
import type { AuditDraft } from "./chain";
import type { CommitResult } from "./ledger.do";
import { commitAcrossShards, payInOnePlace } from "./move-payment";
import type { PayableCharge } from "./movements";
import { type Place, placementOf } from "./place";
import type { CommitPlan } from "./plan";
import { centsPosting, postingStatements } from "./postings";
import { driveTransfer, settledState } from "./transfer-drive";
import type { TransferIntents } from "./transfer-intents";
import { transferInsert } from "./transfers";

/*
 * The one entry that moves money between an agent and a merchant over one of the merchant's charges:
 * `moveMoney(env, movement, turn)`. A domain says whose money goes where and hands the pieces only
 * it knows (its guards and writes on either side, its answer); the ledger finds where each side
 * lives and decides: both in one shard, one batch there; in two, a transfer through transit
 * accounts (send, arrival, completion or reversal) that it drives in the caller's turn and recovers
 * after a crash (the turn's alarm, transfer-intents.ts; the minute cron, transfer-recovery.ts).
 */

/** What the ledger needs of the turn a movement runs in: the agent's, in its wallet object. */
export interface MoveTurn {
  /** Lets the agent's next operation start: called once a one-batch movement is handed to the sequencer. */
  endTurn?: () => void;
  /** Remembers a transfer in flight where the turn's alarm drives it after a crash. */
  intents?: TransferIntents;
  /** Ends the object as a crash would (fault-injection tests only). */
  abort?: () => void;
}

/** An agent pays a merchant's charge from its wallet. */
export interface ChargePayment<C> {
  kind: "payment";
  agentId: string;
  charge: PayableCharge;
  method?: "ledger" | "paylink";
  /** On the charge's side, first: the statements that create the charge being paid (and their guards). */
  prelude?: SqlStatement[];
  /** On the charge's side, before it is paid: e.g. a grant's guard on its figures, and their move. */
  chargeStatements?: SqlStatement[];
  /** On the agent's side: e.g. an approval's guard and its flip to granted. */
  agentStatements?: SqlStatement[];
  /** Added to the `charge.paid` audit row's data. */
  auditData?: Record<string, unknown>;
  /** The request's reserved Idempotency-Key: its answer is stored with the payment. */
  slot?: IdempotencySlot;
  /**
   * How the payment is answered once made: `charge`, the domain's view of the paid charge (given back
   * in the result, and to a retry that finds the payment), and `body`, the 200 stored under `slot`,
   * with `"merchantBalanceMinor":PENDING_FIGURE` where the ledger writes the merchant's balance after it.
   */
  answer(paid: { reference: string; paidAt: string }): { charge: C; body: string };
}

/** How a payment ended. It throws when it cannot tell (its batch's fate unknown, or its transfer still pending). */
export type PaymentResult<C> =
  /** Paid: the domain's view of the paid charge, and the merchant's balance right after the payment. */
  | { kind: "paid"; charge: C; merchantBalanceMinor: number }
  /** Nothing moved: a guard's reason (the balance, a freeze, the charge no longer payable, ...). */
  | { kind: "refused"; reason: string }
  /** The money left the agent and came back: the charge's side refused it for `reason`. */
  | { kind: "reversed"; reason: string };

/** A merchant refunds an agent's payment of one of its charges, decided on the charge's side. */
export interface ChargeRefund {
  kind: "refund";
  /** The refund's id, made where the charge lives: its entries (and its transfer) go under it. */
  id: string;
  agentId: string;
  charge: { id: string; merchantId: string; currency: string };
  /** Exact: a wallet payment below or between cents is refunded to the base unit. */
  amountBaseUnits: bigint;
  at: string;
  /** The refund's guards and writes, before the money moves (the merchant's balance among them). */
  statements: SqlStatement[];
  /** What reads the refund's writes after the money moved: its event, its stored answer. */
  after: SqlStatement[];
  audit: AuditDraft[];
}

export type Movement<C = unknown> = ChargePayment<C> | ChargeRefund;

/**
 * Moves money between an agent and a merchant's charge, in one shard or across two. A payment
 * answers how it ended (PaymentResult); a refund answers its batch's result, decided on the charge's
 * side (across shards its arrival with the agent is owed from then on, and recovered if interrupted).
 */
export function moveMoney<C>(env: Env, movement: ChargePayment<C>, turn: MoveTurn): Promise<PaymentResult<C>>;
export function moveMoney(env: Env, movement: ChargeRefund, turn: MoveTurn): Promise<CommitResult>;
export async function moveMoney<C>(
  env: Env,
  movement: Movement<C>,
  turn: MoveTurn,
): Promise<PaymentResult<C> | CommitResult> {
  const place = placementOf(env);
  const agent = await place.ofAgent(movement.agentId);
  const charge = place.ofId(movement.charge.id);
  if (!charge) throw new Error(`charge ${movement.charge.id} lives in a shard this deployment does not run`);
  if (movement.kind === "refund")
    return agent === charge
      ? charge.commit(refundPlan(movement))
      : refundAcrossShards(env, movement, charge, agent, turn);
  return agent === charge
    ? payInOnePlace(movement, agent, turn)
    : commitAcrossShards(env, movement, { from: agent, to: charge }, turn);
}

/** A refund with the agent in the charge's shard: one batch, the merchant's money back to the agent. */
const refundPlan = (r: ChargeRefund): CommitPlan => ({
  statements: [
    ...r.statements,
    ...postingStatements(
      r.id,
      [{ from: `merchant:${r.charge.merchantId}`, to: `agent:${r.agentId}`, amountBaseUnits: r.amountBaseUnits }],
      r.at,
    ),
    ...r.after,
  ],
  audit: r.audit,
});

/**
 * P1 of a refund whose agent lives in `to`: the refund decided and answered on the charge's shard
 * as within one shard, but the merchant's debit goes into `transit:<to>` with the transfer row,
 * pending, that the agent's shard credits from (P2, which nothing can refuse: transfers.ts).
 */
function refundSendPlan(r: ChargeRefund, from: Place, to: Place): CommitPlan {
  // A transfer row counts cents; a charge paid across shards is whole cents, and so is what remains of it.
  const amountMinor = centsIfWhole(r.amountBaseUnits);
  if (amountMinor === null) throw new Error(`refund ${r.id} across shards is not whole cents`);
  return {
    statements: [
      ...r.statements,
      transferInsert(
        {
          id: r.id,
          kind: "refund",
          fromShard: from.shard,
          toShard: to.shard,
          agentId: r.agentId,
          merchantId: r.charge.merchantId,
          chargeId: r.charge.id,
          amountMinor,
          currency: r.charge.currency,
          description: null,
          checkoutLinkId: null,
          createdAt: r.at,
        },
        null,
      ),
      ...postingStatements(
        r.id,
        [centsPosting(`merchant:${r.charge.merchantId}`, `transit:${to.shard}`, amountMinor)],
        r.at,
      ),
      ...r.after,
    ],
    audit: r.audit,
  };
}

/**
 * A refund whose charge (`from`) and agent (`to`) live in different shards: P1 commits the refund
 * and its send into transit and decides it (its result, refused or committed, is the refund's
 * answer); then the arrival in the agent's shard and the completion are driven inline. What this
 * does not finish (a crash, a shard unreachable) is owed, not undecided: the turn's alarm (the
 * transfer is remembered before P1) and the recovery cron finish it.
 */
async function refundAcrossShards(
  env: Env,
  r: ChargeRefund,
  from: Place,
  to: Place,
  { intents, abort }: MoveTurn,
): Promise<CommitResult> {
  await intents?.remember(r.id, from.shard);
  const sent = await from.commit(refundSendPlan(r, from, to));
  if (sent.kind !== "committed") {
    await intents?.done(r.id);
    return sent;
  }
  try {
    faultPoint("transfer.after_send", { abort });
    const state = await driveTransfer(env, from, r.id, { abort });
    if (state.status !== "pending") await intents?.done(r.id);
  } catch (error) {
    log.warn("refund_transfer", { id: r.id, error });
  }
  return sent;
}

/**
 * Before an agent pays a stored charge: drives the agent's own transfers of that charge a crash left
 * pending (none when the agent and the charge live in one shard). A completed one made for this
 * request (same key) answers it with its payment, as its first answer would have been (`paid`, the
 * domain's view of the charge as it kept it); `drove` says the charge may have changed since it was
 * read, and `forget` is called first when a transfer is pending (the agent's figures will move). A
 * transfer still pending after that throws: a new payment (or a refusal stored under the key) must
 * not go ahead of one whose outcome recovery has yet to decide, and a 5xx frees the key for a retry
 * that finds it decided.
 */
export async function earlierPaymentOf(
  env: Env,
  { agentId, chargeId, slot }: { agentId: string; chargeId: string; slot?: IdempotencySlot },
  turn: { forget: () => void; abort?: () => void },
): Promise<{ paid: { charge: unknown; merchantBalanceMinor: number } } | { drove: boolean }> {
  const place = placementOf(env);
  const home = await place.ofAgent(agentId);
  const charge = place.ofId(chargeId);
  if (charge === home) return { drove: false };
  const { results } = await home.db
    .prepare(
      "SELECT id, status FROM ledger_transfers WHERE agent_id = ? AND charge_id = ? AND kind = 'payment' AND status <> 'reversed'",
    )
    .bind(agentId, chargeId)
    .all<{ id: string; status: string }>();
  if (results.length === 0) return { drove: false };
  if (results.some((t) => t.status === "pending")) turn.forget();
  for (const t of results) {
    const state =
      t.status === "pending"
        ? await driveTransfer(env, home, t.id, { abort: turn.abort })
        : await settledState(env, home, t.id);
    if (state.status === "pending")
      throw new Error(`transfer ${t.id} of charge ${chargeId} is still pending: its recovery will finish it`);
    if (state.status !== "completed" || !slot) continue;
    const kept = state.answer.slot;
    if (kept?.scope === slot.scope && kept.key === slot.key)
      return { paid: { charge: state.answer.charge, merchantBalanceMinor: state.merchantBalanceMinor } };
  }
  return { drove: true };
}
