import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { ChargeIdParam } from "../charges/routes";
import { ApiError } from "../lib/errors";
import { pathId, validate } from "../lib/validation";
import { PayoutParam } from "../payouts/routes";
import { chargeEvidence } from "./evidence";
import { agentX402Receipt, chargeReceipt, payoutReceipt, refundReceipt, storeOfId } from "./service";

/** Checkpoints are made on the minute cron: when to ask again for evidence not ready yet. */
const EVIDENCE_RETRY_SECONDS = 60;

export const RefundIdParam = z.object({ refundId: pathId });
export const AgentX402PaymentIdParam = z.object({ paymentId: pathId });

export const receiptRoutes = new Hono<AppEnv>()
  // Public like the charge itself: the charge id is the capability to read it.
  .get("/charges/:chargeId/receipt", validate("param", ChargeIdParam), async (c) => {
    const { chargeId } = c.req.valid("param");
    const store = storeOfId(c.env, chargeId);
    const receipt = store && (await chargeReceipt(store, c.get("settings").proofs, chargeId));
    if (!receipt) throw new ApiError(404, "charge_not_found");
    return c.json({ receipt });
  })
  // Until paid or succeeded there is nothing to vouch for: 404 as for an unpaid charge.
  .get("/merchant/payouts/:payoutId/receipt", requireActor("merchant"), validate("param", PayoutParam), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const { payoutId } = c.req.valid("param");
    const store = storeOfId(c.env, payoutId);
    const receipt = store && (await payoutReceipt(store, c.get("settings").proofs, merchantId, payoutId));
    if (!receipt) throw new ApiError(404, "payout_not_found");
    return c.json({ receipt });
  })
  .get("/merchant/refunds/:refundId/receipt", requireActor("merchant"), validate("param", RefundIdParam), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const { refundId } = c.req.valid("param");
    const store = storeOfId(c.env, refundId);
    const receipt = store && (await refundReceipt(store, c.get("settings").proofs, merchantId, refundId));
    if (!receipt) throw new ApiError(404, "refund_not_found");
    return c.json({ receipt });
  })
  .get(
    "/agent/x402/payments/:paymentId/receipt",
    requireActor("agent"),
    validate("param", AgentX402PaymentIdParam),
    async (c) => {
      const { agentId } = actorOf(c.get("actor"), "agent");
      const { paymentId } = c.req.valid("param");
      const store = storeOfId(c.env, paymentId);
      const receipt = store && (await agentX402Receipt(store, c.get("settings").proofs, agentId, paymentId));
      if (!receipt) throw new ApiError(404, "agent_x402_payment_not_found");
      return c.json({ receipt });
    },
  )
  .get(
    "/merchant/charges/:chargeId/evidence",
    requireActor("merchant"),
    validate("param", ChargeIdParam),
    async (c) => {
      const { merchantId } = actorOf(c.get("actor"), "merchant");
      const { chargeId } = c.req.valid("param");
      const found = await chargeEvidence(c.env, merchantId, chargeId);
      if (found.kind === "not_found") throw new ApiError(404, "charge_not_found");
      if (found.kind === "not_ready")
        throw new ApiError(409, "evidence_not_ready", {}, { "Retry-After": String(EVIDENCE_RETRY_SECONDS) });
      c.header("content-disposition", `attachment; filename="evidence-${chargeId}.json"`);
      return c.json(found.evidence);
    },
  );
