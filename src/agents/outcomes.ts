import type { Context } from "hono";
import { ApiError } from "../lib/errors";
import type { PayOutcome } from "./wallet";

type Paid = Extract<PayOutcome, { kind: "paid" }>;
type Held = Extract<PayOutcome, { kind: "approval" }>;

/**
 * How a paid outcome is answered, by route: the paying agent's charge
 * (`/charges/:id/pay`, with the merchant's balance), the checkout link's
 * (the agent sees its charge, not the merchant's balance), an approval grant,
 * or a PayLink draw (with the grant's figures). Plain data, so it can travel
 * to the wallet object, which stores the same answer in the payment's batch.
 */
export type PaidView =
  | { kind: "charge" }
  | { kind: "checkout" }
  | { kind: "approval"; approvalId: string }
  | { kind: "draw"; spentMinor: number; remainingMinor: number; exhausted: boolean };

/** The body of a paid answer: one pure function for the live answer and the stored one, so they match byte for byte. */
export function paidBody(view: PaidView, paid: Pick<Paid, "charge" | "merchantBalanceMinor">): Record<string, unknown> {
  switch (view.kind) {
    case "charge":
      return { paid: true, charge: paid.charge, merchantBalanceMinor: paid.merchantBalanceMinor };
    case "checkout":
      return { paid: true, charge: paid.charge };
    case "approval":
      return { approval: { approvalId: view.approvalId, status: "granted" }, charge: paid.charge };
    case "draw": {
      const { chargeId, status, method, reference } = paid.charge;
      return {
        paid: true,
        charge: { chargeId, status, method, reference },
        spentMinor: view.spentMinor,
        remainingMinor: view.remainingMinor,
        exhausted: view.exhausted,
      };
    }
  }
}

/** A payment held for a human: 402 with `pendingApproval` (operations section 5). */
export const heldBody = (held: Omit<Held, "kind">) => ({
  pendingApproval: true,
  reason: held.reason,
  approvalId: held.approvalId,
  expiresAt: held.expiresAt,
  charge: held.charge,
});

/**
 * The one table from wallet outcomes to answers, for HTTP and MCP alike: paid
 * 200; held for a human 402 with `pendingApproval`; policy refusal 402 (thrown);
 * state conflicts 409; unknown objects 404.
 */
export function outcomeReply(
  outcome: PayOutcome,
  view: PaidView,
): { status: 200 | 402; body: Record<string, unknown> } {
  switch (outcome.kind) {
    case "paid":
      return { status: 200, body: paidBody(view, outcome) };
    case "approval":
      return { status: 402, body: heldBody(outcome) };
    case "rejected":
      throw new ApiError(402, outcome.reason);
    case "conflict":
      throw new ApiError(409, outcome.reason);
    case "not_found":
      throw new ApiError(404, outcome.reason);
    case "frozen":
      // The agent is told it may not pay (403); a merchant's draw or a console grant meets a state (409).
      throw new ApiError(view.kind === "draw" || view.kind === "approval" ? 409 : 403, "agent_frozen");
  }
}

export function payOutcomeResponse(c: Context, outcome: PayOutcome, view: PaidView = { kind: "charge" }) {
  const reply = outcomeReply(outcome, view);
  return c.json(reply.body, reply.status);
}
