import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { amountMinor } from "../lib/money";
import { pathId, validate } from "../lib/validation";
import { getMerchant } from "../merchants/service";
import { chargeView, createCharge, getCharge, listMerchantCharges } from "./service";

export const CreateChargeBody = z
  .object({
    amountUsdCents: amountMinor,
    description: z.string().max(1000).optional(),
    externalId: z.string().max(200).optional(),
  })
  .strict();

export const ChargeIdParam = z.object({ chargeId: pathId });

export const chargeRoutes = new Hono<AppEnv>()
  // A merchant's charges live in its home shard; the create's answer is stored in its batch there.
  .post(
    "/merchant/charges",
    requireActor("merchant", { money: "writes" }),
    validate("json", CreateChargeBody),
    async (c) => {
      const merchant = await getMerchant(placementOf(c.env).control.db, actorOf(c.get("actor"), "merchant").merchantId);
      if (!merchant) throw new ApiError(404, "merchant_not_found");
      const body = c.req.valid("json");
      const input = { amountMinor: body.amountUsdCents, description: body.description, externalId: body.externalId };
      const home = await placementOf(c.env).ofMerchant(merchant.id);
      const charge = await createCharge(home, merchant, input, (row) => answerInBatch(c, 201, chargeView(row)));
      return c.json(chargeView(charge), 201);
    },
  )
  .get("/merchant/charges", requireActor("merchant"), async (c) => {
    const { merchantId } = actorOf(c.get("actor"), "merchant");
    const home = await placementOf(c.env).ofMerchant(merchantId);
    const rows = await listMerchantCharges(home.db, merchantId, 100);
    return c.json({ charges: rows.map(chargeView) });
  })
  // The id names the charge's shard.
  .get("/charges/:chargeId", validate("param", ChargeIdParam), async (c) => {
    const { chargeId } = c.req.valid("param");
    const at = placementOf(c.env).ofId(chargeId);
    const charge = at && (await getCharge(at.db, chargeId));
    if (!charge) throw new ApiError(404, "charge_not_found");
    return c.json(chargeView(charge));
  });
