import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { ApiError } from "../lib/errors";
import { log } from "../lib/log";
import { amountMinor } from "../lib/money";
import { pathId, validate } from "../lib/validation";
import { createPayout, getPayout, listPayouts, payoutView, sendPayout, treasuryOf } from "./service";

export const PayoutBody = z
  .object({
    amountUsdCents: amountMinor.optional().describe("Integer cents to pay out; absent pays out the whole balance."),
  })
  .strict();
export const PayoutListQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) });
export const ConsolePayoutQuery = PayoutListQuery.extend({ status: z.enum(["pending", "paid", "failed"]).optional() });
export const PayoutParam = z.object({ payoutId: pathId });

export const payoutRoutes = new Hono<AppEnv>()
  .post(
    "/merchant/payouts",
    // The answer is stored by the payout's batch, with the merchant's money.
    requireActor("merchant", { money: "writes" }),
    validate("json", PayoutBody, { optionalBody: true }),
    async (c) => {
      const x = treasuryOf(c.get("settings").x402);
      const { merchantId } = actorOf(c.get("actor"), "merchant");
      const created = await createPayout(
        c.env,
        x,
        merchantId,
        c.req.valid("json").amountUsdCents,
        c.get("idempotency"),
      );
      // Debited and recorded: the transfer leaves after the answer; the cron finishes what this does not.
      c.executionCtx.waitUntil(
        sendPayout(c.env, x, created.payout.payoutId).catch((error) =>
          log.warn("payout_send", { payoutId: created.payout.payoutId, error }),
        ),
      );
      return c.json(created, 201);
    },
  )
  .get("/merchant/payouts", requireActor("merchant"), validate("query", PayoutListQuery), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const rows = await listPayouts(c.env, { merchantId, limit: c.req.valid("query").limit });
    return c.json({ payouts: rows.map(payoutView) });
  })
  .get("/merchant/payouts/:payoutId", requireActor("merchant"), validate("param", PayoutParam), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const payout = await getPayout(c.env, merchantId, c.req.valid("param").payoutId);
    if (!payout) throw new ApiError(404, "payout_not_found");
    return c.json({ payout: payoutView(payout) });
  })
  .get("/console/payouts", requireActor("console"), validate("query", ConsolePayoutQuery), async (c) => {
    const rows = await listPayouts(c.env, c.req.valid("query"));
    return c.json({ payouts: rows.map(payoutView) });
  });
