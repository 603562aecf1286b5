import { walletOf } from "../../agents/wallet.do";
import type { X402PayOutcome } from "../../agents/x402-pay";
import type { Env, Settings } from "../../config/env";
import { ownAddresses } from "../../config/own-addresses";
import type { IdempotencySlot } from "../../db/idempotency";
import { screenAddress } from "../../kyt/screening";
import { placementOf } from "../../ledger/place";
import { ApiError } from "../../lib/errors";
import { choosePayableEntry, overMaxAmount } from "./choice";
import { claimCover, settlementCover } from "./cover";
import type { OutboundPaymentRequest } from "./request";
import { signOutbound } from "./sign";

/** A payment that did not happen, as the error its callers answer. */
function refusal(outcome: Exclude<X402PayOutcome, { kind: "authorized" | "approval" | "approval_used" }>): ApiError {
  switch (outcome.kind) {
    case "rejected":
      return new ApiError(402, outcome.reason);
    case "conflict":
      return new ApiError(409, outcome.reason);
    case "frozen":
      return new ApiError(403, "agent_frozen");
    case "host_not_allowed":
      return new ApiError(403, "x402_host_not_allowed");
    case "not_found":
      return new ApiError(404, "agent_not_found");
  }
}

/** Paid (201), or held for a human (402 `pendingApproval`): the body as the wallet's batch stored it. */
export interface X402PayAnswer {
  status: 201 | 402;
  body: string;
}

/**
 * An agent pays an x402 paywall from its wallet: the one path of POST /agent/x402/payments and of
 * the MCP tool `pay_x402_resource`. Answers the body as the wallet's batch stored it (under `slot`,
 * when keyed): the payment's 201, or the approval's 402; throws a refusal as an `ApiError`.
 */
export async function payX402Resource(
  env: Env,
  settings: Settings,
  agentId: string,
  { resource, paymentRequired, maxAmountBaseUnits }: OutboundPaymentRequest,
  slot: IdempotencySlot | undefined,
): Promise<X402PayAnswer> {
  const x = settings.x402;
  if (!x) throw new ApiError(503, "x402_not_configured");
  if (!x.settlementPrivateKey) throw new ApiError(503, "treasury_not_configured");
  // What is wrong with the terms themselves is answered before the wallet is asked.
  const choice = choosePayableEntry({ ...x, ownAddresses: ownAddresses(settings) }, paymentRequired);
  if (choice.kind === "unsupported") throw new ApiError(400, "unsupported_payment_requirements");
  if (choice.kind === "invalid")
    throw new ApiError(400, "invalid_payment_requirements", { problem: choice.problem, index: choice.index });
  if (overMaxAmount(choice.terms, maxAmountBaseUnits)) throw new ApiError(402, "over_max_amount");
  const kyt = await screenAddress(placementOf(env).control.db, choice.terms.payTo);
  if (kyt.verdict === "block") throw new ApiError(403, "payee_flagged");
  const { entry, terms } = choice;
  const claim = claimCover(terms.value);
  let outcome: X402PayOutcome;
  try {
    const cover = await settlementCover(env, x, claim);
    if (cover.kind === "short") throw new ApiError(503, "treasury_insufficient_funds");
    if (cover.kind === "unavailable") throw new ApiError(503, "chain_unavailable");
    const signed = await signOutbound(
      x,
      x.settlementPrivateKey,
      { resource, paymentRequired, entry, terms },
      Math.floor(Date.now() / 1000),
    );
    outcome = await walletOf(env, agentId).payX402(agentId, { ...signed, recordedBlock: cover.block }, slot);
  } finally {
    // Committed, it is outstanding in the ledger now; refused, it promised nothing.
    claim.end();
  }
  // Held for a human: the body stored in the hold's batch (or the pending approval's, asked again).
  if (outcome.kind === "approval") return { status: 402, body: outcome.body };
  if (outcome.kind !== "authorized") throw refusal(outcome);
  return { status: 201, body: outcome.body };
}
