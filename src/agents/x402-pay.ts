import { storeResponseStatements } from "../db/idempotency";
import { AGENT_FROZEN } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { type AgentX402Payment, agentX402PaymentPlan, X402_OUT_RECORDED } from "../ledger/x402-out";
import { type CodeWith, codeWith, INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import { evaluatePolicy, x402HostAllowed } from "./policy";
import type { AgentState, WalletTurnCall } from "./wallet-state";
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
  /** Held for a human: outbound payments cannot be held yet (their approvals name no charge). */
  | { kind: "approval" }
  | { kind: "not_found" };

type Judged = Exclude<X402PayOutcome, { kind: "authorized" | "conflict" }> | { kind: "pay" };

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
  const decision = evaluatePolicy(
    { ...agent.policy, allowedCategories: null },
    {
      amountBaseUnits: signed.amountBaseUnits,
      merchantCategory: null,
      spentTodayBaseUnits: agent.spentTodayBaseUnits,
      balanceBaseUnits: agent.balanceBaseUnits,
      skipApprovalThreshold: false,
    },
  );
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  if (decision.kind === "approval") return { kind: "approval" };
  return { kind: "pay" };
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
  if (judged.kind !== "pay") return judged;
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
    result = await home.commit(agentX402PaymentPlan(payment, slot ? storeResponseStatements(slot, 201, body) : []));
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
  return { kind: "conflict", reason: codeWith(409, result.reason) };
}
