import { Hono } from "hono";
import { isAddress } from "viem";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import { isOwnAddress } from "../config/own-addresses";
import { RollKeyBody } from "../keys/roll";
import { rollKeyResponse } from "../keys/roll-response";
import { EVM_ADDRESS, screenAddress } from "../kyt/screening";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { pathId, validate } from "../lib/validation";
import {
  consoleMerchantView,
  getMerchant,
  homeBalance,
  listMerchantsAtHome,
  merchantView,
  registerMerchant,
  setPayoutAddress,
} from "./service";

export const RegisterBody = z
  .object({
    name: z.string().trim().min(1).max(200),
    category: z.string().trim().min(1).max(64).optional(),
  })
  .strict();

/** Both lower- and upper-case hex letters: the address claims an EIP-55 checksum. */
const mixedCase = (address: string) => /[a-f]/.test(address.slice(2)) && /[A-F]/.test(address.slice(2));

export const PayoutAddressBody = z
  .object({
    address: z
      .string()
      .regex(EVM_ADDRESS, "address must be an EVM address: 0x followed by 40 hex digits")
      // A mixed-case address carries an EIP-55 checksum: a typo in one is refused, not paid to.
      .refine((a) => !EVM_ADDRESS.test(a) || !mixedCase(a) || isAddress(a, { strict: true }), {
        message: "address has a wrong EIP-55 checksum (or write it in one case)",
      })
      .refine((a) => !EVM_ADDRESS.test(a) || BigInt(a) !== 0n, { message: "address must not be the zero address" }),
  })
  .strict();

export const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(100) });
export const MerchantParam = z.object({ merchantId: pathId });

export const merchantRoutes = new Hono<AppEnv>()
  .post("/merchants", requireActor("console"), validate("json", RegisterBody), async (c) => {
    const created = await registerMerchant(c.env, placementOf(c.env).control.db, c.req.valid("json"), (created) =>
      answerInBatch(c, 201, created),
    );
    return c.json(created, 201);
  })
  .get("/console/merchants", requireActor("console"), validate("query", ListQuery), async (c) => {
    const rows = await listMerchantsAtHome(c.env, placementOf(c.env).control.db, c.req.valid("query").limit);
    return c.json({ merchants: rows.map(consoleMerchantView) });
  })
  .post(
    "/console/merchants/:merchantId/keys",
    requireActor("console"),
    validate("param", MerchantParam),
    validate("json", RollKeyBody, { optionalBody: true }),
    async (c) => {
      return rollKeyResponse(
        c,
        { kind: "merchant", id: c.req.valid("param").merchantId },
        c.req.valid("json").graceSeconds,
      );
    },
  )
  .get("/merchant/me", requireActor("merchant"), async (c) => {
    const merchant = await getMerchant(placementOf(c.env).control.db, actorOf(c.get("actor"), "merchant").merchantId);
    if (!merchant) throw new ApiError(404, "merchant_not_found");
    return c.json({ merchant: merchantView({ ...merchant, ...(await homeBalance(c.env, merchant)) }) });
  })
  .put("/merchant/payout-address", requireActor("merchant"), validate("json", PayoutAddressBody), async (c) => {
    const { address } = c.req.valid("json");
    if (isOwnAddress(c.get("settings"), address))
      throw new ApiError(400, "invalid_request", {
        issues: [{ path: "address", code: "custom", message: "address must not be the service's own or the token's" }],
      });
    const db = placementOf(c.env).control.db;
    const kyt = await screenAddress(db, address);
    // A flagged address is refused and not stored.
    if (kyt.verdict !== "pass")
      throw new ApiError(403, "payout_address_flagged", { verdict: kyt.verdict, reason: kyt.reason });
    await setPayoutAddress(db, actorOf(c.get("actor"), "merchant").merchantId, address);
    return c.json({ ok: true, kyt });
  });
