import { Hono, type Context } from "hono";
import { keysInHomeOf } from "../ledger/directory";
import { placementOf } from "../ledger/place";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { paidBody, refusalError } from "../agents/outcomes";
import { earlierAnswerUnderKey } from "../agents/transfer-retries";
import { ApiError } from "../lib/errors";
import { amountMinor } from "../lib/money";
import { validate, pathId } from "../lib/validation";
import { answerInBatch } from "../auth/idempotency";
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

const merchantKeysInHome = (c: Context<AppEnv>) =>
  keysInHomeOf(c.env, "merchant", actorOf(c.get("actor"), "merchant").merchantId);

/** The drawn agent's home shard, from the body (not validated yet: an unusable one reserves in control, and is refused after). */
async function agentOfDrawKeysInHome(c: Context<AppEnv>) {
  // The bytes, as the validator and the key's hash read them (hono keeps them): a parsed copy would be re-serialized for them.
  let body: unknown = null;
  try {
    body = JSON.parse(new TextDecoder().decode(await c.req.arrayBuffer()));
  } catch {
    body = null;
  }
  const agentId = body && typeof body === "object" && "agentId" in body ? body.agentId : null;
  return typeof agentId === "string" && agentId.length > 0 && agentId.length <= 64
    ? keysInHomeOf(c.env, "agent", agentId)
    : c.env.DB;
}

export const paylinkRoutes = new Hono<AppEnv>()
  .post(
    "/merchant/paylinks",
    requireActor("merchant", { keysIn: merchantKeysInHome }),
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
    // The draw's answer is stored where the payment's last batch commits: the agent's home shard.
    requireActor("merchant", { keysIn: agentOfDrawKeysInHome }),
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
      // A retry whose first draw crossed shards and lost its answer is answered with that draw.
      const earlier = await earlierAnswerUnderKey(c.env, body.agentId, c.get("idempotency"));
      if (earlier) return c.json(earlier);
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
