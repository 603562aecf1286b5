import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { getMerchant } from "../merchants/service";
import { ApiError } from "../lib/errors";
import { amountMinor } from "../lib/money";
import { validate, pathId } from "../lib/validation";
import { answerInBatch } from "../auth/idempotency";
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
  .post("/merchant/charges", requireActor("merchant"), validate("json", CreateChargeBody), async (c) => {
    const merchant = await getMerchant(c.get("db"), actorOf(c.get("actor"), "merchant").merchantId);
    if (!merchant) throw new ApiError(404, "merchant_not_found");
    const body = c.req.valid("json");
    const input = { amountMinor: body.amountUsdCents, description: body.description, externalId: body.externalId };
    const charge = await createCharge(c.env.DB, merchant, input, (row) => answerInBatch(c, 201, chargeView(row)));
    return c.json(chargeView(charge), 201);
  })
  .get("/merchant/charges", requireActor("merchant"), async (c) => {
    const rows = await listMerchantCharges(c.get("db"), actorOf(c.get("actor"), "merchant").merchantId, 100);
    return c.json({ charges: rows.map(chargeView) });
  })
  .get("/charges/:chargeId", validate("param", ChargeIdParam), async (c) => {
    const charge = await getCharge(c.get("db"), c.req.valid("param").chargeId);
    if (!charge) throw new ApiError(404, "charge_not_found");
    return c.json(chargeView(charge));
  });
