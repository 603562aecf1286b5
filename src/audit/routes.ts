import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env";
import { requireActor } from "../auth/middleware";
import { verifyChain } from "./chain";
import { ApiError } from "../lib/errors";
import { validate } from "../lib/validation";
import { csvExportResponse } from "./csv";
import { settingsOf } from "../env";
import { auditRows, firstAuditRows } from "./service";

const DAY_MS = 86_400_000;

const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "expected a date as YYYY-MM-DD")
  .refine(
    (d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(`${d}T00:00:00Z`).toISOString().startsWith(d),
    "not a calendar date",
  );

export const ExportQuery = z.object({ from: isoDate.optional(), to: isoDate.optional() });
/** The API's export also takes `shard`: one ledger shard's complete chain rather than all merged. */
export const ShardExportQuery = ExportQuery.extend({
  // Bounded by LEDGER_SHARDS where it is read: a shard this deployment does not run is refused there.
  shard: z.coerce.number().int().min(0).max(1000).optional(),
});
export const PageQuery = z.object({
  afterSeq: z.coerce.number().int().nonnegative().default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(500),
});

/** `from` and `to` are inclusive UTC days; the default is the last 30 days up to today. */
export function exportRange(from: string | undefined, to: string | undefined, now = Date.now()) {
  const today = new Date(now).toISOString().slice(0, 10);
  const toDay = to ?? today;
  const fromDay = from ?? new Date(Date.parse(`${toDay}T00:00:00Z`) - 29 * DAY_MS).toISOString().slice(0, 10);
  if (fromDay > toDay)
    throw new ApiError(400, "invalid_request", {
      issues: [{ path: "from", code: "custom", message: "from must not be after to" }],
    });
  const fromIso = `${fromDay}T00:00:00.000Z`;
  // The end of the day as a string bound (rows are compared as ISO text): the next day's midnight
  // would be `+010000-01-01...` after 9999-12-31, which sorts before every real timestamp.
  const toIso = `${toDay}T24:00:00.000Z`;
  return { fromDay, toDay, fromIso, toIso };
}

export const auditRoutes = new Hono<AppEnv>()
  .get("/export/transactions.csv", requireActor("console"), validate("query", ShardExportQuery), (c) => {
    const { from, to, shard } = c.req.valid("query");
    const range = exportRange(from, to);
    if (shard !== undefined && shard >= settingsOf(c.env).ledgerShards)
      throw new ApiError(400, "invalid_request", {
        issues: [{ path: "shard", code: "custom", message: "no such ledger shard" }],
      });
    return csvExportResponse(c.env, range, { shard });
  })
  .get("/console/audit", requireActor("console"), validate("query", PageQuery), async (c) => {
    const { afterSeq, limit } = c.req.valid("query");
    const rows = await firstAuditRows(c.env, limit, { afterSeq });
    return c.json({ events: rows, nextAfterSeq: rows.length === limit ? rows[rows.length - 1]!.seq : null });
  })
  .get("/console/audit/verify", requireActor("console"), async (c) => {
    return c.json(await verifyChain(auditRows(c.env)));
  });
