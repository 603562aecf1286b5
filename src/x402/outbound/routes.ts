import { Hono } from "hono";
import { z } from "zod";
import { AgentParam } from "../../agents/routes";
import { walletOf } from "../../agents/wallet.do";
import type { X402PayOutcome } from "../../agents/x402-pay";
import { getAgentX402Payment, listAgentX402Payments } from "../../agents/x402-payments";
import type { AppEnv } from "../../auth/app-env";
import { actorOf, requireActor } from "../../auth/middleware";
import { screenAddress } from "../../kyt/screening";
import { placementOf } from "../../ledger/place";
import { ApiError } from "../../lib/errors";
import { pathId, validate } from "../../lib/validation";
import { choosePayableEntry, overMaxAmount } from "./choice";
import { settlementCover } from "./cover";
import { OutboundPaymentRequest } from "./request";
import { signOutbound } from "./sign";

export const X402PaymentsQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) });
export const X402PaymentParam = z.object({ paymentId: pathId });

/** A payment that did not happen, as the error the route throws. */
function refusal(outcome: Exclude<X402PayOutcome, { kind: "authorized" }>): ApiError {
  switch (outcome.kind) {
    case "rejected":
      return new ApiError(402, outcome.reason);
    case "conflict":
      return new ApiError(409, outcome.reason);
    case "frozen":
      return new ApiError(403, "agent_frozen");
    case "host_not_allowed":
      return new ApiError(403, "x402_host_not_allowed");
    case "approval":
      return new ApiError(402, "x402_approval_unavailable");
    case "not_found":
      return new ApiError(404, "agent_not_found");
  }
}

/** An agent pays x402 paywalls anywhere from its wallet, and reads those payments; the console lists them. */
export const agentX402Routes = new Hono<AppEnv>()
  .post(
    "/agent/x402/payments",
    // Its answer (the signed header) is stored in the batch that debits the agent, in its home.
    requireActor("agent", { money: "writes" }),
    validate("json", OutboundPaymentRequest),
    async (c) => {
      const { agentId } = actorOf(c.get("actor"), "agent");
      const { resource, paymentRequired, maxAmountBaseUnits } = c.req.valid("json");
      const x = c.get("settings").x402;
      if (!x) throw new ApiError(503, "x402_not_configured");
      if (!x.settlementPrivateKey) throw new ApiError(503, "treasury_not_configured");
      // What is wrong with the terms themselves is answered before the wallet is asked.
      const choice = choosePayableEntry(x, paymentRequired);
      if (choice.kind === "unsupported") throw new ApiError(400, "unsupported_payment_requirements");
      if (choice.kind === "invalid")
        throw new ApiError(400, "invalid_payment_requirements", { problem: choice.problem, index: choice.index });
      if (overMaxAmount(choice.terms, maxAmountBaseUnits)) throw new ApiError(402, "over_max_amount");
      const kyt = await screenAddress(placementOf(c.env).control.db, choice.terms.payTo);
      if (kyt.verdict === "block") throw new ApiError(403, "payee_flagged");
      const { entry, terms } = choice;
      const cover = await settlementCover(c.env, x, terms.value);
      if (cover.kind === "short") throw new ApiError(503, "treasury_insufficient_funds");
      if (cover.kind === "unavailable") throw new ApiError(503, "chain_unavailable");
      const signed = await signOutbound(
        x,
        x.settlementPrivateKey,
        { resource, paymentRequired, entry, terms },
        Math.floor(Date.now() / 1000),
      );
      const outcome = await walletOf(c.env, agentId).payX402(
        agentId,
        { ...signed, recordedBlock: cover.block },
        c.get("idempotency"),
      );
      if (outcome.kind !== "authorized") throw refusal(outcome);
      // The very text the batch stored under the request's key: a replay answers it byte for byte.
      return c.body(outcome.body, 201, { "content-type": "application/json" });
    },
  )
  .get("/agent/x402/payments", requireActor("agent"), validate("query", X402PaymentsQuery), async (c) => {
    const { agentId } = actorOf(c.get("actor"), "agent");
    const payments = await listAgentX402Payments(c.env, agentId, c.req.valid("query").limit);
    if (!payments) throw new ApiError(404, "agent_not_found");
    return c.json({ payments });
  })
  .get("/agent/x402/payments/:paymentId", requireActor("agent"), validate("param", X402PaymentParam), async (c) => {
    const { agentId } = actorOf(c.get("actor"), "agent");
    const payment = await getAgentX402Payment(c.env, agentId, c.req.valid("param").paymentId);
    if (!payment) throw new ApiError(404, "agent_x402_payment_not_found");
    return c.json({ payment });
  })
  .get(
    "/console/agents/:agentId/x402/payments",
    requireActor("console"),
    validate("param", AgentParam),
    validate("query", X402PaymentsQuery),
    async (c) => {
      const payments = await listAgentX402Payments(c.env, c.req.valid("param").agentId, c.req.valid("query").limit);
      if (!payments) throw new ApiError(404, "agent_not_found");
      return c.json({ payments });
    },
  );
