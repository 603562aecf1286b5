import { storeResponseStatements } from "../db/idempotency";
import { AGENT_FROZEN } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { type AgentX402Payment, agentX402PaymentPlan, X402_OUT_RECORDED } from "../ledger/x402-out";
import { type CodeWith, codeWith, INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import { evaluatePolicy, x402HostAllowed } from "./policy";
import type { AgentState, WalletTurnCall } from "./wallet-state";
import {
  holdX402,
  type OpenX402Approval,
  openX402Approvals,
  usingApproval,
  X402_APPROVAL_USED,
  type X402Request,
} from "./x402-approvals";
import { type AgentX402PaymentView, agentX402PaymentView } from "./x402-payments";

/**
 * What the route hands the wallet: an authorization already signed from the settlement address for
 * exactly the chosen entry, and the header that carries it. It is given to the agent only if the
 * wallet commits it: refused, it is dropped, never having left the service.
 */
export type SignedX402Payment = Omit<AgentX402Payment, "id" | "agentId" | "createdAt"> & {
  /** Every URL the terms name beside `resource` (a version 2 answer's `resource.url`, the entry's `resource`): each host must be allowed. */
  alsoNamed: string[];
};

/** How an outbound x402 payment ended; the route maps each to its answer. */
export type X402PayOutcome =
  | { kind: "authorized"; payment: AgentX402PaymentView; body: string }
  | { kind: "rejected"; reason: CodeWith<402> }
  | { kind: "conflict"; reason: CodeWith<409> }
  | { kind: "frozen" }
  | { kind: "host_not_allowed" }
  /** Held for a human (402 `pendingApproval`, `body` as stored under the request's key): nothing signed or debited. */
  | { kind: "approval"; body: string; expiresAt: string }
  /** The granted approval it meant to use was used first by another payment: decide again, in a new turn. */
  | { kind: "approval_used" }
  | { kind: "not_found" };

type Judged =
  | Exclude<X402PayOutcome, { kind: "authorized" | "conflict" | "approval" | "approval_used" }>
  | { kind: "pay" }
  | { kind: "approval"; reason: string; agent: AgentState };

/** The policy on the exact amount; the category rule does not apply (a paywall anywhere has no merchant category). */
const policyOn = (agent: AgentState, signed: SignedX402Payment, approved: boolean) =>
  evaluatePolicy(
    { ...agent.policy, allowedCategories: null },
    {
      amountBaseUnits: signed.amountBaseUnits,
      merchantCategory: null,
      spentTodayBaseUnits: agent.spentTodayBaseUnits,
      balanceBaseUnits: agent.balanceBaseUnits,
      skipApprovalThreshold: approved,
    },
  );

/**
 * The wallet's decision on an outbound payment: frozen first, then the agent's allowed hosts, then
 * its policy as for any payment (per-transaction cap, daily limit, approval threshold, balance) on
 * the exact amount. The category rule does not apply: a paywall anywhere has no merchant category.
 */
function judge(agent: AgentState | undefined, signed: SignedX402Payment): Judged {
  if (!agent) return { kind: "not_found" };
  if (agent.frozen) return { kind: "frozen" };
  const urls = [signed.resource, ...signed.alsoNamed];
  if (!urls.every((url) => x402HostAllowed(agent.policy, url))) return { kind: "host_not_allowed" };
  const decision = policyOn(agent, signed, false);
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  if (decision.kind === "approval") return { kind: "approval", reason: decision.reason, agent };
  return { kind: "pay" };
}

const requestOf = (agentId: string, s: SignedX402Payment): X402Request => ({
  agentId,
  resource: s.resource,
  payTo: s.payTo,
  network: s.network,
  asset: s.asset,
  amountBaseUnits: s.amountBaseUnits,
});

/**
 * Over the approval threshold: a granted, unexpired, unused approval of this very request lets it
 * through (the policy's other rules and the balance still apply); otherwise the request is held for
 * a human. `decide` waited for every batch of this agent in flight, so the approvals read are current.
 */
async function overThreshold(
  call: WalletTurnCall,
  signed: SignedX402Payment,
  judged: Extract<Judged, { kind: "approval" }>,
  now: number,
): Promise<X402PayOutcome | { kind: "use"; approval: OpenX402Approval }> {
  const request = requestOf(call.agentId, signed);
  const open = await openX402Approvals((await placementOf(call.env).ofAgent(call.agentId)).db, request);
  const granted = open.find((a) => a.status === "granted" && a.expiresAt > nowIso(now));
  if (granted) {
    const decision = policyOn(judged.agent, signed, true);
    if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
    return { kind: "use", approval: granted };
  }
  const held = await holdX402(call, request, judged.reason, open, now);
  return "kind" in held ? held : { kind: "approval", body: held.body, expiresAt: held.expiresAt };
}

/**
 * Pays someone else's x402 paywall from the agent's wallet, in the agent's turn: the policy decides
 * on the exact amount, then one batch debits the wallet, records the payment with its header, and
 * stores the keyed request's answer. A signature whose batch was refused or lost was never handed to
 * anyone, and the answer given is the one stored, so the same key answers the same header.
 */
export async function payX402(call: WalletTurnCall, signed: SignedX402Payment): Promise<X402PayOutcome> {
  const { env, agentId, turn, slot } = call;
  const now = Date.now();
  const judged = await turn.cache.decide(
    env,
    agentId,
    now,
    (agent) => judge(agent, signed),
    (d) => d.kind === "pay",
  );
  let approval: OpenX402Approval | undefined;
  if (judged.kind === "approval") {
    const next = await overThreshold(call, signed, judged, now);
    if (next.kind !== "use") return next;
    approval = next.approval;
  } else if (judged.kind !== "pay") return judged;
  const home = await placementOf(env).ofAgent(agentId);
  const { alsoNamed: _, ...recorded } = signed;
  const payment = { ...recorded, id: newId("agentX402Payment", home), agentId, createdAt: nowIso(now) };
  const view = agentX402PaymentView({ ...payment, status: "authorized", txHash: null, settledAt: null });
  const body = JSON.stringify({ payment: view, header: signed.header });
  // Held from later decisions until the batch ends, so the next one (which may start now) cannot spend it too.
  const end = turn.cache.hold(signed.amountBaseUnits);
  turn.endTurn();
  let result: Awaited<ReturnType<typeof home.commit>>;
  try {
    const plan = agentX402PaymentPlan(payment, slot ? storeResponseStatements(slot, 201, body) : []);
    result = await home.commit(approval ? usingApproval(plan, approval, payment.id, payment.createdAt) : plan);
  } catch (error) {
    end("unsure");
    throw error;
  }
  // Refused as already recorded: the sequencer committed it again after a batch whose answer was lost. It landed once.
  if (result.kind === "committed" || result.reason === X402_OUT_RECORDED) {
    end("committed");
    return { kind: "authorized", payment: view, body };
  }
  // A refused balance or freeze means the remembered figures were wrong: read them again.
  const balance = result.reason === INSUFFICIENT_BALANCE;
  const frozen = result.reason === AGENT_FROZEN;
  end(balance || frozen ? "unsure" : "unchanged");
  if (frozen) return { kind: "frozen" };
  if (balance) return { kind: "rejected", reason: INSUFFICIENT_BALANCE };
  if (result.reason === X402_APPROVAL_USED) return { kind: "approval_used" };
  return { kind: "conflict", reason: codeWith(409, result.reason) };
}
