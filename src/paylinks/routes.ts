import { Hono } from "hono";
import { z } from "zod";
import { paidBody, refusalError } from "../agents/outcomes";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { amountMinor } from "../lib/money";
import { pathId, validate } from "../lib/validation";
import { grantObjectOf } from "./grant.do";
import {
  acceptPaylinkByCode,
  acceptRefusal,
  createPaylink,
  dbOfPaylink,
  drawTargetOf,
  paylinkByCode,
  paylinkCreatedView,
  paylinkPublicView,
  paylinkUsage,
} from "./service";

export const CreateBody = z
  .object({
    budgetUsdCents: amountMinor,
    label: z.string().trim().min(1).max(200).optional(),
    perChargeUsdCents: amountMinor.optional(),
    maxUses: z.number().int().positive().max(1_000_000).optional(),
    expiresInHours: z
      .number()
      .int()
      .positive()
      .max(24 * 366)
      .optional(),
  })
  .strict();
export const DrawBody = z
  .object({
    agentId: z.string().min(1).max(64),
    amountUsdCents: amountMinor,
    description: z.string().max(1000).optional(),
  })
  .strict();
export const CodeParam = z.object({ code: pathId });

export const paylinkRoutes = new Hono<AppEnv>()
  .post(
    "/merchant/paylinks",
    requireActor("merchant", { money: "writes" }),
    validate("json", CreateBody),
    async (c) => {
      const body = c.req.valid("json");
      const { merchantId } = actorOf(c.get("actor"), "merchant");
      // A PayLink and its grants live in the merchant's home shard; the create's answer is stored there.
      const home = await placementOf(c.env).ofMerchant(merchantId);
      const paylink = await createPaylink(
        home,
        merchantId,
        {
          budgetMinor: body.budgetUsdCents,
          label: body.label,
          perChargeMinor: body.perChargeUsdCents,
          maxUses: body.maxUses,
          expiresInHours: body.expiresInHours,
        },
        (row) => answerInBatch(c, 201, paylinkCreatedView(row)),
      );
      return c.json(paylinkCreatedView(paylink), 201);
    },
  )
  .get("/pl/:code", validate("param", CodeParam), async (c) => {
    const db = dbOfPaylink(c.env, c.req.valid("param").code);
    const found = await paylinkByCode(db, c.req.valid("param").code);
    if (!found) throw new ApiError(404, "paylink_not_found");
    return c.json(paylinkPublicView(found.paylink, found.merchantName, await paylinkUsage(db, found.paylink.id)));
  })
  .post("/pl/:code/accept", requireActor("agent"), validate("param", CodeParam), async (c) => {
    const accepted = await acceptPaylinkByCode(
      c.env,
      c.req.valid("param").code,
      actorOf(c.get("actor"), "agent").agentId,
    );
    if (accepted.kind !== "accepted") throw acceptRefusal(accepted);
    return c.json({ grantId: accepted.grantId, paylink: accepted.paylink });
  })
  .post(
    "/merchant/paylinks/:code/charge",
    // The draw's answer is stored where the payment's last batch commits: with the agent's money, the agent the body names.
    requireActor("merchant", { money: "pays" }),
    validate("param", CodeParam),
    validate("json", DrawBody),
    async (c) => {
      const body = c.req.valid("json");
      const target = await drawTargetOf(c.env, c.req.valid("param").code, body.agentId);
      // Another merchant's PayLink is indistinguishable from an unknown one.
      if (target.kind !== "found" || target.merchantId !== actorOf(c.get("actor"), "merchant").merchantId)
        throw new ApiError(404, "paylink_not_found");
      const grantId = target.grantId;
      if (!grantId) throw new ApiError(409, "sin_grant_del_agente");
      const outcome = await grantObjectOf(c.env, grantId).draw(
        { grantId, amountMinor: body.amountUsdCents, description: body.description ?? null },
        c.get("idempotency"),
      );
      // Refused: a frozen agent is a state of the grant's wallet to the merchant (409), not a 403 of its own.
      if (outcome.kind !== "paid") throw refusalError(outcome, "merchant");
      const { spentMinor, remainingMinor, exhausted } = outcome;
      return c.json(
        paidBody(
          { kind: "draw", spentMinor, remainingMinor, exhausted },
          { charge: outcome.charge, merchantBalanceMinor: 0 },
        ),
      );
    },
  );
