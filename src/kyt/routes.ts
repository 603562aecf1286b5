import { desc } from "drizzle-orm";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { actorOf, requireActor } from "../auth/middleware";
import { kytBlocklist } from "../db/schema";
import { nowIso } from "../lib/time";
import { validate } from "../lib/validation";
import { EVM_ADDRESS, screenAddress } from "./screening";

const Address = z.string().trim().regex(EVM_ADDRESS, "address must be an EVM address: 0x followed by 40 hex digits");

export const ScreenBody = z.object({ address: Address, chain: z.string().trim().min(1).max(64) }).strict();
export const BlocklistBody = z
  .object({ address: Address, reason: z.string().trim().min(1).max(200).default("operator") })
  .strict();

export const kytRoutes = new Hono<AppEnv>()
  .post("/kyt/screen", requireActor("console"), validate("json", ScreenBody), async (c) => {
    return c.json(await screenAddress(c.get("db"), c.req.valid("json").address));
  })
  .get("/console/kyt/blocklist", requireActor("console"), async (c) => {
    const rows = await c.get("db").select().from(kytBlocklist).orderBy(desc(kytBlocklist.createdAt)).limit(1000).all();
    return c.json({ entries: rows });
  })
  .post("/console/kyt/blocklist", requireActor("console"), validate("json", BlocklistBody), async (c) => {
    const { address, reason } = c.req.valid("json");
    const entry = {
      address: address.toLowerCase(),
      reason,
      addedBy: actorOf(c.get("actor"), "console").email,
      createdAt: nowIso(),
    };
    await c
      .get("db")
      .insert(kytBlocklist)
      .values(entry)
      .onConflictDoUpdate({ target: kytBlocklist.address, set: { reason, addedBy: entry.addedBy } });
    return c.json({ entry }, 201);
  });
