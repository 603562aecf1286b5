import { type Context, Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { body } from "../lib/api-shapes";
import { ApiError } from "../lib/errors";
import { validate } from "../lib/validation";
import { discoveryList, merchantListings } from "./discovery";
import { FacilitatorRequest } from "./facilitator-protocol";
import { merchantPayTo, networkOf, settleForMerchant, verifyForMerchant } from "./facilitator-service";
import { gasAccountOf } from "./transfer";

/** The path below which the official facilitator clients find `/supported`, `/verify` and `/settle`. */
export const FACILITATOR_PATH = "/x402/facilitator";

export const FacilitatorBody = body("X402FacilitatorRequest", FacilitatorRequest);
export const DiscoveryQuery = z.object({
  type: z.string().max(16).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).max(100_000).default(0),
});
export const MerchantResourcesQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) }).strict();

function x402Settings(c: Context<AppEnv>) {
  const x = c.get("settings").x402;
  if (!x) throw new ApiError(503, "x402_not_configured");
  return x;
}

const merchantIdOf = (c: Context<AppEnv>) => actorOf(c.get("actor"), "merchant").merchantId;

export const facilitatorRoutes = new Hono<AppEnv>()
  // All a merchant's middleware needs to use the service as its facilitator.
  .get("/merchant/x402/facilitator", requireActor("merchant"), async (c) => {
    const x = x402Settings(c);
    const payTo = await merchantPayTo(c.env, x, merchantIdOf(c));
    return c.json({
      facilitatorUrl: `${new URL(c.req.url).origin}${FACILITATOR_PATH}`,
      payTo,
      network: networkOf(x, 2),
      asset: x.asset,
      extra: { name: x.assetName, version: x.assetVersion },
    });
  })
  .get("/merchant/x402/resources", requireActor("merchant"), validate("query", MerchantResourcesQuery), async (c) => {
    return c.json(await merchantListings(c.env, merchantIdOf(c), c.req.valid("query").limit));
  })
  .get(`${FACILITATOR_PATH}/supported`, requireActor("merchant"), (c) => {
    const x = x402Settings(c);
    return c.json({
      kinds: [
        { x402Version: 1, scheme: "exact", network: networkOf(x, 1) },
        { x402Version: 2, scheme: "exact", network: networkOf(x, 2) },
      ],
      extensions: ["bazaar"],
      signers: { "eip155:*": x.facilitatorPrivateKeys.map((key) => gasAccountOf(key).address) },
    });
  })
  .post(`${FACILITATOR_PATH}/verify`, requireActor("merchant"), validate("json", FacilitatorBody), async (c) => {
    return c.json(await verifyForMerchant(c.env, x402Settings(c), merchantIdOf(c), c.req.valid("json")));
  })
  .post(`${FACILITATOR_PATH}/settle`, requireActor("merchant"), validate("json", FacilitatorBody), async (c) => {
    const x = x402Settings(c);
    c.header("Cache-Control", "no-store");
    return c.json(await settleForMerchant(c.env, x, merchantIdOf(c), c.req.valid("json")));
  })
  // Public, as the x402 discovery list is: what merchants' routes declared for discovery and were paid for.
  .get(`${FACILITATOR_PATH}/discovery/resources`, validate("query", DiscoveryQuery), async (c) => {
    return c.json(await discoveryList(c.env, c.req.valid("query")));
  });
