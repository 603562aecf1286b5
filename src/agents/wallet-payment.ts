import { codeWith } from "../lib/error-codes";
import type { Env } from "../config/env";
import { chargeView } from "../charges/service";
import { ledgerOf, type CommitResult } from "../ledger/ledger.do";
import { AGENT_FROZEN, walletPaymentPlan } from "../ledger/movements";
import type { SqlStatement } from "../db/statements";
import { balanceAfter } from "../ledger/postings";
import { faultPoint } from "../lib/faults";
import { PENDING_FIGURE, storeTemplateStatements } from "../db/idempotency";
import { newId } from "../lib/ids";
import { dbOfShard, shardOfId } from "../db/shards";
import { ownerShard } from "../ledger/directory";
import { commitAcrossShards } from "./wallet-transfer";
import type { ArrivalExtras } from "../ledger/transfers";
import { nowIso } from "../lib/time";
import { paidBody, type PaidView, type PayOutcome } from "./outcomes";
import { evaluatePolicy, POLICY_REASONS } from "./policy";
import type { AgentState, PayableSnapshot, WalletTurnCall } from "./wallet-state";

/** A frozen agent's wallet decides nothing; otherwise its policy decides. */
export function decide(
  agent: AgentState,
  charge: PayableSnapshot,
  skipApprovalThreshold: boolean,
): ReturnType<typeof evaluatePolicy> | { kind: "frozen" } {
  if (agent.frozen) return { kind: "frozen" };
  return evaluatePolicy(agent.policy, {
    amountMinor: charge.amountMinor,
    merchantCategory: charge.merchantCategory,
    spentTodayMinor: agent.spentTodayMinor,
    balanceMinor: agent.balanceMinor,
    skipApprovalThreshold,
  });
}

/** The policy's decision on a charge not stored yet, from the wallet object's figures; undefined when the agent does not exist. */
export const decideOnCharge = (
  { env, agentId, turn }: WalletTurnCall,
  charge: PayableSnapshot,
  { now, skipApprovalThreshold }: { now: number; skipApprovalThreshold: boolean },
) =>
  turn.cache.decide(
    env,
    agentId,
    now,
    (agent) => agent && decide(agent, charge, skipApprovalThreshold),
    (d) => d?.kind === "pay",
  );

/** How a payment is committed, beyond the charge: `view` is how its route answers it (stored under the call's slot). */
export interface PaymentOptions {
  view: PaidView;
  method?: "ledger" | "paylink";
  prelude?: SqlStatement[];
  /** On the charge's side: a grant's guard and figures (with one shard, simply in the batch). */
  extraStatements?: SqlStatement[];
  /** On the agent's side: an approval's guard and its flip (with one shard, simply in the batch, after the extras). */
  payerStatements?: SqlStatement[];
  auditData?: Record<string, unknown>;
}

/**
 * Whether the charge was paid with this reference (the payment's batch landed), and if so the
 * merchant's balance right after it, as the batch's own answer has it: today's balance less the
 * merchant's postings after this payment's (a group's entries are appended in its plans' order, and
 * a balance is the sum of its postings). Only entries since the payment are read, so old ones may be
 * archived and no index by account is needed. Undefined when it did not land; throws when D1 cannot tell.
 */
async function landedPayment(
  env: Env,
  charge: { id: string; merchantId: string },
  reference: string,
): Promise<{ balanceMinor: number } | undefined> {
  const account = `merchant:${charge.merchantId}`;
  const row = await dbOfShard(env, shardOfId(charge.id))
    .prepare(
      `SELECT m.balance_minor - (SELECT COALESCE(SUM(amount_minor), 0) FROM ledger_entries WHERE account = ?1
               AND rowid > (SELECT MAX(rowid) FROM ledger_entries WHERE transfer_id = ?2 AND account = ?1)) AS balanceMinor
     FROM charges c JOIN merchants m ON m.id = c.merchant_id WHERE c.id = ?3 AND c.reference = ?2`,
    )
    .bind(account, reference, charge.id)
    .first<{ balanceMinor: number }>();
  return row ?? undefined;
}

/** The arrival's extras of a payment across shards; none for a plain wallet payment of a stored charge. */
function arrivalExtrasOf(options: PaymentOptions): ArrivalExtras | undefined {
  const extras: ArrivalExtras = {
    method: options.method ?? "ledger",
    prelude: options.prelude ?? [],
    statements: options.extraStatements ?? [],
    auditData: options.auditData ?? {},
  };
  const plain =
    extras.method === "ledger" &&
    extras.prelude.length === 0 &&
    extras.statements.length === 0 &&
    Object.keys(extras.auditData).length === 0;
  return plain ? undefined : extras;
}

/** Commits a wallet payment of a pending charge and answers the paid outcome, or why it did not land. */
export async function commitPayment(
  call: WalletTurnCall,
  charge: PayableSnapshot,
  options: PaymentOptions,
): Promise<PayOutcome> {
  const { env, agentId, turn, slot } = call;
  const shard = await ownerShard(env, "agent", agentId);
  const chargeShard = shardOfId(charge.id);
  if (chargeShard !== shard) {
    // A charge born with its payment (checkout link), a PayLink draw or an approval grant carries
    // statements on either side: the charge's go in the arrival, the agent's in the send.
    return commitAcrossShards(
      call,
      charge,
      options.view,
      { from: shard, to: chargeShard },
      { arrival: arrivalExtrasOf(options), payerStatements: options.payerStatements },
    );
  }
  const paidAt = nowIso();
  const reference = newId("payment", { shard: shard });
  const method = options.method ?? "ledger";
  const paidCharge = chargeView({ ...charge, status: "paid", agentId, method, reference, paidAt });
  // The answer, with the merchant's balance after this payment written in by the batch itself.
  const epilogue = slot
    ? storeTemplateStatements(
        slot,
        200,
        JSON.stringify(paidBody(options.view, { charge: paidCharge, merchantBalanceMinor: PENDING_FIGURE })),
        "merchantBalanceMinor",
        "SELECT balance_minor FROM merchants WHERE id = ?",
        charge.merchantId,
      )
    : [];
  // Held until the batch ends, so the next decision (which may start once the batch is handed over) cannot spend it too.
  const end = turn.cache.hold(charge.amountMinor);
  let result: CommitResult | undefined;
  let failure: unknown;
  try {
    faultPoint("payment.before_commit", { abort: turn.abort });
    const committing = ledgerOf(env, shard).commit(
      walletPaymentPlan({
        charge,
        agentId,
        method,
        reference,
        paidAt,
        prelude: options.prelude,
        extraStatements: [...(options.extraStatements ?? []), ...(options.payerStatements ?? [])],
        epilogue,
        auditData: options.auditData,
      }),
    );
    turn.endTurn();
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
      landed = await landedPayment(env, charge, reference);
    } catch (lookupError) {
      // Cannot tell whether it landed: nothing definite to answer, and the wallet's figures are unsure.
      end("unsure");
      throw failure ?? lookupError;
    }
    if (landed) {
      end("committed");
      return { kind: "paid", charge: paidCharge, merchantBalanceMinor: landed.balanceMinor };
    }
  }
  if (!result) {
    end("unsure");
    throw failure;
  }
  if (result.kind === "refused") {
    // A refused balance means the remembered figures were wrong; a freeze that landed first, that
    // they are (the next read sees it); any other refusal changed nothing of this agent.
    const balance = result.reason === POLICY_REASONS.balance;
    const frozen = result.reason === AGENT_FROZEN;
    end(balance || frozen ? "unsure" : "unchanged");
    if (frozen) return { kind: "frozen" };
    return balance
      ? { kind: "rejected", reason: POLICY_REASONS.balance }
      : { kind: "conflict", reason: codeWith(409, result.reason) };
  }
  end("committed");
  faultPoint("payment.after_commit");
  const merchantBalanceMinor = balanceAfter(result.results, `merchant:${charge.merchantId}`) ?? 0;
  return { kind: "paid", charge: paidCharge, merchantBalanceMinor };
}
