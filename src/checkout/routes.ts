import { type Context, Hono } from "hono";
import { z } from "zod";
import { payOutcomeResponse } from "../agents/outcomes";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { amountMinor } from "../lib/money";
import { pathId, validate } from "../lib/validation";
import {
  CHECKOUT_PAID_VIEW,
  checkoutLinkCreatedView,
  checkoutLinkMerchantView,
  checkoutLinkPublicView,
  createCheckoutLink,
  dbOfCheckoutLink,
  listCheckoutLinks,
  payCheckoutLink,
  setCheckoutLinkActive,
  visitCheckoutLink,
} from "./service";

export const CreateBody = z
  .object({
    amountUsdCents: amountMinor,
    description: z.string().trim().min(1).max(1000),
    externalId: z.string().max(200).optional(),
  })
  .strict();
export const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) });
export const PatchBody = z.object({ active: z.boolean() }).strict();
export const TokenParam = z.object({ token: pathId });

/** The merchant's home shard, where its links live. */
const merchantHome = async (c: Context<AppEnv>) =>
  (await placementOf(c.env).ofMerchant(actorOf(c.get("actor"), "merchant").merchantId)).db;

export const checkoutRoutes = new Hono<AppEnv>()
  .post(
    "/merchant/checkout",
    requireActor("merchant", { money: "writes" }),
    validate("json", CreateBody),
    async (c) => {
      const body = c.req.valid("json");
      const { merchantId } = actorOf(c.get("actor"), "merchant");
      const home = await placementOf(c.env).ofMerchant(merchantId);
      const link = await createCheckoutLink(
        home,
        merchantId,
        {
          amountMinor: body.amountUsdCents,
          description: body.description,
          externalId: body.externalId,
        },
        (row) => answerInBatch(c, 201, checkoutLinkCreatedView(row)),
      );
      return c.json(checkoutLinkCreatedView(link), 201);
    },
  )
  .get("/merchant/checkout-links", requireActor("merchant"), validate("query", ListQuery), async (c) => {
    const { links, total } = await listCheckoutLinks(
      await merchantHome(c),
      actorOf(c.get("actor"), "merchant").merchantId,
      c.req.valid("query").limit,
    );
    return c.json({ links: links.map(checkoutLinkMerchantView), total });
  })
  .patch(
    "/merchant/checkout-links/:token",
    requireActor("merchant"),
    validate("param", TokenParam),
    validate("json", PatchBody),
    async (c) => {
      const link = await setCheckoutLinkActive(
        await merchantHome(c),
        actorOf(c.get("actor"), "merchant").merchantId,
        c.req.valid("param").token,
        c.req.valid("json").active,
      );
      if (!link) throw new ApiError(404, "checkout_link_not_found");
      return c.json(checkoutLinkMerchantView(link));
    },
  )
  .get("/checkout/:token", validate("param", TokenParam), async (c) => {
    // Hono answers HEAD with this handler (and drops the body): only a GET is a visit.
    const { token } = c.req.valid("param");
    const visited = await visitCheckoutLink(dbOfCheckoutLink(c.env, token), token, c.req.method === "GET");
    if (!visited) throw new ApiError(404, "checkout_link_not_found");
    // "Checkout errors: 404 unknown token; 409 link disabled": no status value but `active` is ever shown.
    if (!visited.link.active) throw new ApiError(409, "checkout_link_disabled");
    return c.json(checkoutLinkPublicView(visited.link, visited.merchantName));
  })
  .post(
    "/checkout/:token/pay",
    // A payment's answer (or its hold's) is stored with the agent's money, where its last batch commits.
    requireActor("agent", { money: "pays" }),
    validate("param", TokenParam),
    async (c) => {
      const { agentId } = actorOf(c.get("actor"), "agent");
      const outcome = await payCheckoutLink(c.env, agentId, c.req.valid("param").token, c.get("idempotency"));
      return payOutcomeResponse(c, outcome, CHECKOUT_PAID_VIEW, "agent");
    },
  );
