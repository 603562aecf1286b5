import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { ChargeIdParam } from "../charges/routes";
import { ApiError } from "../lib/errors";
import { pathId, validate } from "../lib/validation";
import { PayoutParam } from "../payouts/routes";
import { chargeReceipt, payoutReceipt, refundReceipt } from "./service";

export const RefundIdParam = z.object({ refundId: pathId });

export const receiptRoutes = new Hono<AppEnv>()
  // Public like the charge itself: the charge id is the capability to read it.
  .get("/charges/:chargeId/receipt", validate("param", ChargeIdParam), async (c) => {
    const receipt = await chargeReceipt(c.env.DB, c.get("settings").proofs, c.req.valid("param").chargeId);
    if (!receipt) throw new ApiError(404, "charge_not_found");
    return c.json({ receipt });
  })
  // Until paid or succeeded there is nothing to vouch for: 404 as for an unpaid charge.
  .get("/merchant/payouts/:payoutId/receipt", requireActor("merchant"), validate("param", PayoutParam), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const receipt = await payoutReceipt(c.env.DB, c.get("settings").proofs, merchantId, c.req.valid("param").payoutId);
    if (!receipt) throw new ApiError(404, "payout_not_found");
    return c.json({ receipt });
  })
  .get("/merchant/refunds/:refundId/receipt", requireActor("merchant"), validate("param", RefundIdParam), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const receipt = await refundReceipt(c.env.DB, c.get("settings").proofs, merchantId, c.req.valid("param").refundId);
    if (!receipt) throw new ApiError(404, "refund_not_found");
    return c.json({ receipt });
  });
