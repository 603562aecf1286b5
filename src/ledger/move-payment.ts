import type { Env } from "../config/env";
import { reservationHeldStatement, storeTemplateStatements } from "../db/idempotency";
import { faultPoint } from "../lib/faults";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import type { CommitResult } from "./ledger.do";
import type { ChargePayment, MoveTurn, PaymentResult } from "./move";
import { walletPaymentPlan } from "./movements";
import type { Place } from "./place";
import { balanceAfter } from "./postings";
import { commitOrNothing, driveTransfer, type KeptAnswer, readTransfer } from "./transfer-drive";
import { type ArrivalExtras, type CrossShardPayment, sendPlan } from "./transfers";

/*
 * A wallet payment of a charge, as move.ts hands it over: in one batch when the agent and the charge
 * live in one shard, else a transfer from the agent's shard to the charge's.
 */

/** A new payment's reference (made in the agent's shard) and time, and how its request is answered. */
function newPayment<C>(p: ChargePayment<C>, home: Place) {
  const paidAt = nowIso();
  const reference = newId("payment", home);
  return { paidAt, reference, answer: p.answer({ reference, paidAt }) };
}

/**
 * Whether the charge was paid with this reference (the payment's batch landed), and if so the
 * merchant's balance right after it, as the batch's own answer has it: today's balance less the
 * merchant's postings after this payment's (a group's entries are appended in its plans' order, and
 * a balance is the sum of its postings). Only entries since the payment are read, so old ones may be
 * archived and no index by account is needed. Undefined when it did not land; throws when D1 cannot tell.
 */
async function landedPayment(
  at: Place,
  charge: { id: string; merchantId: string },
  reference: string,
): Promise<{ balanceMinor: number } | undefined> {
  const account = `merchant:${charge.merchantId}`;
  const row = await at.db
    .prepare(
      `SELECT (m.balance_base_units - (SELECT COALESCE(SUM(amount_base_units), 0) FROM ledger_entries WHERE account = ?1
               AND rowid > (SELECT MAX(rowid) FROM ledger_entries WHERE transfer_id = ?2 AND account = ?1))) / 10000 AS balanceMinor
     FROM charges c JOIN merchants m ON m.id = c.merchant_id WHERE c.id = ?3 AND c.reference = ?2`,
    )
    .bind(account, reference, charge.id)
    .first<{ balanceMinor: number }>();
  return row ?? undefined;
}

/**
 * A payment whose agent and charge live in `at`: one batch there. The turn ends once the batch is
 * handed to the sequencer, so the agent's next decision runs while it commits.
 */
export async function payInOnePlace<C>(p: ChargePayment<C>, at: Place, turn: MoveTurn): Promise<PaymentResult<C>> {
  const { charge, agentId, slot } = p;
  const { paidAt, reference, answer } = newPayment(p, at);
  // The answer, with the merchant's balance after this payment written in by the batch itself.
  const epilogue = slot
    ? storeTemplateStatements(
        slot,
        200,
        answer.body,
        "merchantBalanceMinor",
        "SELECT balance_minor FROM merchants WHERE id = ?",
        charge.merchantId,
      )
    : [];
  let result: CommitResult | undefined;
  let failure: unknown;
  try {
    faultPoint("payment.before_commit", { abort: turn.abort });
    const committing = at.commit(
      walletPaymentPlan({
        charge,
        agentId,
        method: p.method ?? "ledger",
        reference,
        paidAt,
        prelude: p.prelude,
        extraStatements: [...(p.chargeStatements ?? []), ...(p.agentStatements ?? [])],
        epilogue,
        auditData: p.auditData,
      }),
    );
    turn.endTurn?.();
    result = await committing;
  } catch (error) {
    failure = error;
  }
  if (!result || result.kind === "refused") {
    // The batch may have landed though this call did not hear so: an answer lost after the commit,
    // or a group commit re-applied one plan at a time after it had in fact committed (this plan's
    // second try is then refused by its own write, or fails on the charge it creates). The
    // reference is this attempt's own, so a charge that carries it was paid by this payment.
    let landed: { balanceMinor: number } | undefined;
    try {
      landed = await landedPayment(at, charge, reference);
    } catch (lookupError) {
      // Cannot tell whether it landed: nothing definite to answer.
      throw failure ?? lookupError;
    }
    if (landed) return { kind: "paid", charge: answer.charge, merchantBalanceMinor: landed.balanceMinor };
  }
  if (!result) throw failure;
  if (result.kind === "refused") return { kind: "refused", reason: result.reason };
  faultPoint("payment.after_commit");
  const merchantBalanceMinor = balanceAfter(result.results, `merchant:${charge.merchantId}`) ?? 0;
  return { kind: "paid", charge: answer.charge, merchantBalanceMinor };
}

/** The refusal of a wallet payment across two shards of an amount that is not whole cents (409). */
export const CROSS_SHARD_NOT_WHOLE_CENTS = "cross_shard_amount_not_whole_cents";

/** The arrival's extras of a payment across shards; none for a plain wallet payment of a stored charge. */
function arrivalExtrasOf(p: ChargePayment<unknown>): ArrivalExtras | undefined {
  const extras: ArrivalExtras = {
    method: p.method ?? "ledger",
    prelude: p.prelude ?? [],
    statements: p.chargeStatements ?? [],
    auditData: p.auditData ?? {},
  };
  const plain =
    extras.method === "ledger" &&
    extras.prelude.length === 0 &&
    extras.statements.length === 0 &&
    Object.keys(extras.auditData).length === 0;
  return plain ? undefined : extras;
}

/**
 * Pays a charge in `to` from the agent's wallet in `from`: P1, then P2 and P3 inline, answering
 * exactly as a payment within one shard does. The turn is kept until the transfer is decided, so the
 * agent's next decision sees its outcome. The charge's side statements (a charge born with its
 * payment, a grant's) go in the arrival, kept with the transfer; the agent's (an approval's) in the send.
 */
export async function commitAcrossShards<C>(
  env: Env,
  p: ChargePayment<C>,
  { from, to }: { from: Place; to: Place },
  turn: MoveTurn,
): Promise<PaymentResult<C>> {
  const { charge, agentId, slot } = p;
  // A transfer row counts cents: an amount that is not whole cents does not cross, refused before anything is written.
  if (charge.amountBaseUnits % 10_000 !== 0) return { kind: "refused", reason: CROSS_SHARD_NOT_WHOLE_CENTS };
  const { paidAt, reference, answer } = newPayment(p, from);
  const kept: KeptAnswer = slot ? { charge: answer.charge, slot, template: answer.body } : { charge: answer.charge };
  const payment: CrossShardPayment = { charge, agentId, fromShard: from.shard, toShard: to.shard, reference, paidAt };
  const context = { abort: turn.abort };
  faultPoint("payment.before_commit", context);
  await turn.intents?.remember(reference, from.shard);
  const answerGuard = [...(slot ? [reservationHeldStatement(slot)] : []), ...(p.agentStatements ?? [])];
  const sent = await commitOrNothing(from, sendPlan(payment, answerGuard, JSON.stringify(kept), arrivalExtrasOf(p)));
  if (sent?.kind !== "committed" && !(await readTransfer(from, reference))) {
    await turn.intents?.done(reference);
    if (!sent) throw new Error(`transfer ${reference}: the send did not land`);
    return { kind: "refused", reason: sent.reason };
  }
  faultPoint("transfer.after_send", context);
  const state = await driveTransfer(env, from, reference, context);
  if (state.status === "completed") {
    await turn.intents?.done(reference);
    return { kind: "paid", charge: answer.charge, merchantBalanceMinor: state.merchantBalanceMinor };
  }
  if (state.status === "reversed") {
    await turn.intents?.done(reference);
    return { kind: "reversed", reason: state.reason };
  }
  throw new Error(`transfer ${reference} is still pending: its recovery will finish it`);
}
