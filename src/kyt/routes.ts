import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { placementOf } from "../ledger/place";
import { nowIso } from "../lib/time";
import { validate } from "../lib/validation";
import { blocklistEntries, EVM_ADDRESS, putOnBlocklist, screenAddress } from "./screening";

const Address = z.string().trim().regex(EVM_ADDRESS, "address must be an EVM address: 0x followed by 40 hex digits");

export const ScreenBody = z.object({ address: Address, chain: z.string().trim().min(1).max(64) }).strict();
export const BlocklistBody = z
  .object({ address: Address, reason: z.string().trim().min(1).max(200).default("operator") })
  .strict();

export const kytRoutes = new Hono<AppEnv>()
  .post("/kyt/screen", requireActor("console"), validate("json", ScreenBody), async (c) => {
    return c.json(await screenAddress(placementOf(c.env).control.db, c.req.valid("json").address));
  })
  .get("/console/kyt/blocklist", requireActor("console"), async (c) => {
    return c.json({ entries: await blocklistEntries(placementOf(c.env).control.db, 1000) });
  })
  .post("/console/kyt/blocklist", requireActor("console"), validate("json", BlocklistBody), async (c) => {
    const { address, reason } = c.req.valid("json");
    const entry = {
      address: address.toLowerCase(),
      reason,
      addedBy: actorOf(c.get("actor"), "console").email,
      createdAt: nowIso(),
    };
    await putOnBlocklist(placementOf(c.env).control.db, entry);
    return c.json({ entry }, 201);
  });
