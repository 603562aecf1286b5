import { type ChargeView, chargeView } from "../charges/service";
import { PENDING_FIGURE } from "../db/idempotency";
import type { SqlStatement } from "../db/statements";
import { moveMoney, type PaymentResult } from "../ledger/move";
import { AGENT_FROZEN } from "../ledger/movements";
import { codeWith } from "../lib/error-codes";
import type { BatchEnd } from "../lib/held-figures";
import { type PaidView, type PayOutcome, paidBody } from "./outcomes";
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
    amountBaseUnits: BigInt(charge.amountBaseUnits),
    merchantCategory: charge.merchantCategory,
    spentTodayBaseUnits: agent.spentTodayBaseUnits,
    balanceBaseUnits: agent.balanceBaseUnits,
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
  /** On the charge's side, first: the statements that create the charge being paid. */
  prelude?: SqlStatement[];
  /** On the charge's side: a grant's guard and figures. */
  extraStatements?: SqlStatement[];
  /** On the agent's side: an approval's guard and its flip. */
  payerStatements?: SqlStatement[];
  auditData?: Record<string, unknown>;
  /** Called when the payment left the agent and came back (its charge's side refused it), once its hold has ended. */
  afterReversal?: (reason: string) => Promise<void>;
}

/**
 * Commits a wallet payment of a pending charge through the ledger's one entry (in the charge's
 * shard or across two, the ledger's choice) and answers the paid outcome, or why it did not land.
 * The amount is held from the agent's later decisions until the payment ends.
 */
export async function commitPayment(
  call: WalletTurnCall,
  charge: PayableSnapshot,
  options: PaymentOptions,
): Promise<PayOutcome> {
  const { env, agentId, turn, slot } = call;
  const method = options.method ?? "ledger";
  // Held until the batch ends, so the next decision (which may start once the batch is handed over) cannot spend it too.
  const end = turn.cache.hold(BigInt(charge.amountBaseUnits));
  let moved: PaymentResult<ChargeView>;
  try {
    moved = await moveMoney(
      env,
      {
        kind: "payment",
        agentId,
        charge,
        method,
        prelude: options.prelude,
        chargeStatements: options.extraStatements,
        agentStatements: options.payerStatements,
        auditData: options.auditData,
        slot,
        answer: ({ reference, paidAt }) => {
          const paid = chargeView({ ...charge, status: "paid", agentId, method, reference, paidAt });
          const body = paidBody(options.view, { charge: paid, merchantBalanceMinor: PENDING_FIGURE });
          return { charge: paid, body: JSON.stringify(body) };
        },
      },
      turn,
    );
  } catch (error) {
    // Nothing definite to answer (the batch's fate unknown, or its transfer still pending): the figures are unsure.
    end("unsure");
    throw error;
  }
  const outcome = outcomeOf(moved, end);
  if (moved.kind === "reversed") await options.afterReversal?.(moved.reason);
  return outcome;
}

/** A reversal's reason as a 409 when it is one, else as given (the arrival's record may hold any). */
const conflictReason = (reason: string) => {
  try {
    return codeWith(409, reason);
  } catch {
    return reason as ReturnType<typeof codeWith<409>>;
  }
};

/** The payment's outcome, ending its hold on the wallet's figures as it ended. */
function outcomeOf(moved: PaymentResult<ChargeView>, end: (how: BatchEnd) => void): PayOutcome {
  if (moved.kind === "paid") {
    end("committed");
    return { kind: "paid", charge: moved.charge, merchantBalanceMinor: moved.merchantBalanceMinor };
  }
  if (moved.kind === "reversed") {
    // The money came back: read the figures again.
    end("unsure");
    return { kind: "conflict", reason: conflictReason(moved.reason) };
  }
  // A refused balance means the remembered figures were wrong; a freeze that landed first, that
  // they are (the next read sees it); any other refusal changed nothing of this agent.
  const balance = moved.reason === POLICY_REASONS.balance;
  const frozen = moved.reason === AGENT_FROZEN;
  end(balance || frozen ? "unsure" : "unchanged");
  if (frozen) return { kind: "frozen" };
  return balance
    ? { kind: "rejected", reason: POLICY_REASONS.balance }
    : { kind: "conflict", reason: codeWith(409, moved.reason) };
}
