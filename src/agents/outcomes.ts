import type { Context } from "hono";
import type { ChargeView } from "../charges/service";
import type { CodeWith } from "../lib/error-codes";
import { ApiError } from "../lib/errors";

/** Outcomes of a wallet operation; routes map each to a status in one table (`outcomeReply`). */
export type PayOutcome =
  | { kind: "paid"; charge: ChargeView; merchantBalanceMinor: number }
  | { kind: "approval"; approvalId: string; reason: string; expiresAt: string; charge: ChargeView }
  | { kind: "rejected"; reason: CodeWith<402> }
  | { kind: "conflict"; reason: CodeWith<409> }
  | { kind: "not_found"; reason: CodeWith<404> }
  /** The agent is frozen: nothing of its money moves (403 to the agent, 409 to a merchant's draw or a grant). */
  | { kind: "frozen" };

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

/** A payment held for a human: 402 with `pendingApproval`, the approval and the charge it holds. */
export const heldBody = (held: Omit<Held, "kind">) => ({
  pendingApproval: true,
  reason: held.reason,
  approvalId: held.approvalId,
  expiresAt: held.expiresAt,
  charge: held.charge,
});

/**
 * Whose request a payment answers. It decides only what a frozen agent is told: the paying agent
 * may not pay (403); a merchant drawing on its PayLink grant, or a console user granting its held
 * payment, meets a state of its wallet (409).
 */
export type PaymentRequester = "agent" | "merchant" | "console";

/** A payment that did not happen, as the error the route throws: policy refusal 402, state conflicts 409, unknown objects 404. */
export function refusalError(
  outcome: Exclude<PayOutcome, { kind: "paid" } | { kind: "approval" }>,
  requester: PaymentRequester,
): ApiError {
  switch (outcome.kind) {
    case "rejected":
      return new ApiError(402, outcome.reason);
    case "conflict":
      return new ApiError(409, outcome.reason);
    case "not_found":
      return new ApiError(404, outcome.reason);
    case "frozen":
      return new ApiError(requester === "agent" ? 403 : 409, "agent_frozen");
  }
}

/**
 * The one table from wallet outcomes to answers, for HTTP and MCP alike: paid
 * 200; held for a human 402 with `pendingApproval`; anything else thrown as
 * its `refusalError`.
 */
export function outcomeReply(
  outcome: PayOutcome,
  view: PaidView,
  requester: PaymentRequester,
): { status: 200 | 402; body: Record<string, unknown> } {
  switch (outcome.kind) {
    case "paid":
      return { status: 200, body: paidBody(view, outcome) };
    case "approval":
      return { status: 402, body: heldBody(outcome) };
    default:
      throw refusalError(outcome, requester);
  }
}

export function payOutcomeResponse(c: Context, outcome: PayOutcome, view: PaidView, requester: PaymentRequester) {
  const reply = outcomeReply(outcome, view, requester);
  return c.json(reply.body, reply.status);
}
