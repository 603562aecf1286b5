import type { ChargeView } from "../charges/service";
import { chargeCreationStatements } from "../charges/service";
import { executeBatch, guard, guardReasonOf, type SqlStatement } from "../db/statements";
import { earlierPaymentOf } from "../ledger/move";
import { AGENT_FROZEN, agentNotFrozenCheck } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import type { PaidView, PayOutcome } from "./outcomes";
import { requestApproval } from "./wallet-hold";
import { commitPayment, decide, decideOnCharge } from "./wallet-payment";
import {
  type AgentState,
  type ApprovalSnapshot,
  type PayableSnapshot,
  readCharge,
  readChargeState,
  type WalletTurnCall,
} from "./wallet-state";

/** The agent's own payment of a stored charge is answered with the charge and the merchant's balance after it. */
const STORED_CHARGE_VIEW: PaidView = { kind: "charge" };

/** A charge born with its payment: `birthGuards` run first in its batch; `view` is how its route answers it. */
export interface NewChargePayment {
  charge: PayableSnapshot;
  birthGuards: SqlStatement[];
  view: PaidView;
}

/** A draw on a PayLink grant: `grantStatements` guard and move the grant's figures in the payment's batch. */
export interface WalletDraw {
  charge: PayableSnapshot;
  grantStatements: SqlStatement[];
  auditData: Record<string, string | number | null>;
  view: PaidView;
}

/**
 * Pays a stored charge from the agent's wallet. Runs inside the agent's wallet
 * Durable Object, so no two decisions for one agent interleave; the charge's
 * own state is guarded in the batch, so two agents can never both pay it.
 * `ahead` is the charge, read before the agent's turn began.
 */
export async function payCharge(
  call: WalletTurnCall,
  chargeId: string,
  ahead: Promise<PayableSnapshot | undefined>,
): Promise<PayOutcome> {
  const { env, agentId, turn, slot } = call;
  let snapshot = ahead;
  // A retry of a payment whose first answer was lost while its transfer was in flight finds it first.
  const earlier = await earlierPaymentOf(
    env,
    { agentId, chargeId, slot },
    { forget: () => turn.cache.forget(), abort: turn.abort },
  );
  if ("paid" in earlier)
    // The paid charge as this wallet kept it with the transfer.
    return {
      kind: "paid",
      charge: earlier.paid.charge as ChargeView,
      merchantBalanceMinor: earlier.paid.merchantBalanceMinor,
    };
  // This agent already paid (or is paying) the charge: the snapshot read before the turn is stale.
  if (earlier.drove) {
    ahead.catch(() => undefined);
    snapshot = readCharge(env, chargeId);
  }
  const now = Date.now();
  const act = (
    judged: ReturnType<typeof judgeCharge>,
    pendingApproval: ApprovalSnapshot | undefined,
  ): Promise<PayOutcome> | PayOutcome => {
    if (judged.kind === "outcome") return judged.outcome;
    const { charge, decision } = judged;
    if (decision.kind === "frozen") return { kind: "frozen" };
    if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
    if (decision.kind === "approval")
      return requestApproval(call, charge, { reason: decision.reason, existing: pendingApproval, now, prelude: [] });
    return commitPayment(call, charge, { view: STORED_CHARGE_VIEW });
  };
  const charge = await snapshot;
  const first = await turn.cache.decide(env, agentId, now, (agent) => judgeCharge({ charge, agent }), paysNow);
  if (first.kind === "outcome" || first.decision.kind !== "approval") return act(first, undefined);
  // A hold is rare and must see this agent's latest approval of the charge: decide again on one fresh read
  // (nothing of this agent is in flight: `decide` waited for it).
  turn.cache.forget();
  const fresh = await readChargeState(env, agentId, chargeId, now);
  return act(judgeCharge(fresh), fresh.pendingApproval);
}

const paysNow = (judged: ReturnType<typeof judgeCharge>) =>
  judged.kind === "decision" && judged.decision.kind === "pay";

/** What the wallet can say of a stored charge before anything is written: an outcome already, or the policy's decision. */
function judgeCharge({ charge, agent }: { charge: PayableSnapshot | undefined; agent: AgentState | undefined }) {
  if (!charge)
    return {
      kind: "outcome" as const,
      outcome: { kind: "not_found", reason: "charge_not_found" } satisfies PayOutcome,
    };
  if (!agent)
    return { kind: "outcome" as const, outcome: { kind: "not_found", reason: "agent_not_found" } satisfies PayOutcome };
  // A charge being settled on chain by x402 is not open to the wallet, nor is one a merchant's
  // facilitated settlement made (only that payment pays it, even once it failed).
  if (charge.status !== "pending" || charge.x402Claim || charge.facilitated)
    return {
      kind: "outcome" as const,
      outcome: { kind: "conflict", reason: "charge_not_pending" } satisfies PayOutcome,
    };
  return { kind: "decision" as const, charge, decision: decide(agent, charge, false) };
}

/**
 * Pays a charge that is born with the payment (a checkout link's): the charge
 * is created in the same batch that pays it, or that holds it for approval,
 * so a refused payment leaves no charge behind. `birthGuards` run first (the
 * link is still active).
 */
export async function payNewCharge(
  call: WalletTurnCall,
  { charge, birthGuards, view }: NewChargePayment,
): Promise<PayOutcome> {
  const now = Date.now();
  const decision = await decideOnCharge(call, charge, { now, skipApprovalThreshold: false });
  if (!decision) return { kind: "not_found", reason: "agent_not_found" };
  if (decision.kind === "frozen") return { kind: "frozen" };
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  const prelude = [...birthGuards, ...chargeCreationStatements(charge, charge.merchantName)];
  if (decision.kind === "approval")
    return requestApproval(call, charge, { reason: decision.reason, existing: undefined, now, prelude });
  return commitPayment(call, charge, { view, prelude });
}

/**
 * Draws on a PayLink grant: a pre-authorized human decision, so the approval
 * threshold is skipped, but hard limits and the balance apply. The charge is
 * created already paid (method `paylink`); the grant's statements guard and
 * move its figures in the same batch.
 */
export async function drawFromWallet(
  call: WalletTurnCall,
  { charge, grantStatements, auditData, view }: WalletDraw,
): Promise<PayOutcome> {
  const decision = await decideOnCharge(call, charge, { now: Date.now(), skipApprovalThreshold: true });
  if (!decision) return { kind: "not_found", reason: "agent_not_found" };
  if (decision.kind === "frozen") return { kind: "frozen" };
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  return commitPayment(call, charge, {
    view,
    method: "paylink",
    prelude: chargeCreationStatements(charge, charge.merchantName),
    extraStatements: grantStatements,
    auditData,
  });
}

/**
 * Writes `statements` in one batch unless the agent is frozen, as the wallet object already knows it
 * from the agent's home (every freeze takes its turn there). They go where the object `beside` lives
 * (an id: a PayLink's code, say), or to control without one. When that is the agent's home the batch
 * guards the freeze too; elsewhere there is no agent row to guard, and the wallet's turn is the
 * guarantee. With no statements, only tells whether the agent is frozen. An agent that does not
 * exist is not frozen, and its home batch is refused.
 */
export async function writeUnlessFrozen(
  { env, agentId, turn }: WalletTurnCall,
  statements: SqlStatement[],
  beside?: string,
): Promise<"written" | "frozen"> {
  const agent = await turn.cache.read(env, agentId, Date.now());
  if (agent?.frozen) return "frozen";
  if (statements.length === 0) return "written";
  const place = placementOf(env);
  const at = beside === undefined ? place.control : place.ofId(beside);
  if (!at) throw new Error(`${beside} lives in a shard this deployment does not run`);
  const home = await place.ofAgent(agentId);
  try {
    await executeBatch(at.db, [...(at === home ? [guard(...agentNotFrozenCheck(agentId))] : []), ...statements]);
  } catch (error) {
    if (guardReasonOf(error) === AGENT_FROZEN) return "frozen";
    throw error;
  }
  return "written";
}
