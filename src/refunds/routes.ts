import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { log } from "../lib/log";
import { amountMinor } from "../lib/money";
import { pathId, validate } from "../lib/validation";
import { createRefund, listRefunds, sendRefund } from "./service";

export const RefundBody = z
  .object({
    amountUsdCents: amountMinor
      .optional()
      .describe("Integer cents to refund; absent refunds what remains of the charge."),
  })
  .strict();
export const RefundChargeParam = z.object({ chargeId: pathId });

export const refundRoutes = new Hono<AppEnv>()
  .post(
    "/merchant/charges/:chargeId/refunds",
    // The answer is stored by the refund's batch, with the charge the path names (an id of a shard
    // not run here names no charge: its 404 is answered from control).
    requireActor("merchant", { money: "writes" }),
    validate("param", RefundChargeParam),
    validate("json", RefundBody, { optionalBody: true }),
    async (c) => {
      const x = c.get("settings").x402;
      const { merchantId } = actorOf(c.get("actor"), "merchant");
      const created = await createRefund(
        c.env,
        x,
        merchantId,
        c.req.valid("param").chargeId,
        c.req.valid("json").amountUsdCents,
        c.get("idempotency"),
      );
      // An x402 refund is debited and recorded: the transfer leaves after the answer; the cron finishes what this does not.
      if (created.refund.status === "pending" && x) {
        const { refundId } = created.refund;
        c.executionCtx.waitUntil(
          sendRefund(c.env, x, refundId).catch((error) => log.warn("refund_send", { refundId, error })),
        );
      }
      return c.json(created, 201);
    },
  )
  .get(
    "/merchant/charges/:chargeId/refunds",
    requireActor("merchant"),
    validate("param", RefundChargeParam),
    async (c) => {
      const { merchantId } = actorOf(c.get("actor"), "merchant");
      return c.json({ refunds: await listRefunds(c.env, merchantId, c.req.valid("param").chargeId) });
    },
  );
