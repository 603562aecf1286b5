import { Hono } from "hono";
import { z } from "zod";
import { AgentParam } from "../../agents/routes";
import { getAgentX402Payment, listAgentX402Payments } from "../../agents/x402-payments";
import type { AppEnv } from "../../auth/app-env";
import { actorOf, requireActor } from "../../auth/middleware";
import { ApiError } from "../../lib/errors";
import { pathId, validate } from "../../lib/validation";
import { payX402Resource } from "./pay";
import { OutboundPaymentRequest } from "./request";

export const X402PaymentsQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) });
export const X402PaymentParam = z.object({ paymentId: pathId });

/** An agent pays x402 paywalls anywhere from its wallet, and reads those payments; the console lists them. */
export const agentX402Routes = new Hono<AppEnv>()
  .post(
    "/agent/x402/payments",
    // Its answer (the signed header) is stored in the batch that debits the agent, in its home.
    requireActor("agent", { money: "writes" }),
    validate("json", OutboundPaymentRequest),
    async (c) => {
      const { agentId } = actorOf(c.get("actor"), "agent");
      const answer = await payX402Resource(
        c.env,
        c.get("settings"),
        agentId,
        c.req.valid("json"),
        c.get("idempotency"),
      );
      // The very text the batch stored under the request's key: a replay answers it byte for byte.
      return c.body(answer.body, answer.status, { "content-type": "application/json" });
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
