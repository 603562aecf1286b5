import type { Context } from "hono";
import { ApiError } from "../lib/errors";
import type { PayOutcome } from "./wallet";

/**
 * The one table from wallet outcomes to HTTP: paid 200; held for a human 402
 * with `pendingApproval` (operations section 5); policy refusal 402; state
 * conflicts 409; unknown objects 404.
 */
export function payOutcomeResponse(
  c: Context,
  outcome: PayOutcome,
  renderPaid = (paid: Extract<PayOutcome, { kind: "paid" }>): object => ({ paid: true, charge: paid.charge, merchantBalanceMinor: paid.merchantBalanceMinor }),
) {
  switch (outcome.kind) {
    case "paid":
      return c.json(renderPaid(outcome), 200);
    case "approval":
      return c.json({ pendingApproval: true, reason: outcome.reason, approvalId: outcome.approvalId, expiresAt: outcome.expiresAt, charge: outcome.charge }, 402);
    case "rejected":
      throw new ApiError(402, outcome.reason);
    case "conflict":
      throw new ApiError(409, outcome.reason);
    case "not_found":
      throw new ApiError(404, outcome.reason);
  }
}
