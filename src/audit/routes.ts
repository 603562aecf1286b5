import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { requireActor } from "../auth/middleware";
import type { Env } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { placeNumbered } from "../ledger/place-numbered";
import { shardLabel } from "../ledger/shard-labels";
import { ApiError } from "../lib/errors";
import { validate } from "../lib/validation";
import { csvExportResponse } from "./csv";
import { firstAuditRows } from "./service";
import { verifyEveryShard } from "./verification";

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
/** `full=true` re-hashes the whole history; by default only the rows after the last verified point. */
export const VerifyQuery = z.object({ full: z.enum(["true", "false"]).default("false") });

/** A page of one ledger shard's chain (shard 0, the one there always was, unless named). */
const shardParam = z.coerce
  .number()
  .int()
  .min(0)
  .max(1000)
  .default(0)
  .describe("The ledger shard whose chain (or checkpoints) to read; each shard's seqs start at 1.");

export const ShardPageQuery = PageQuery.extend({ shard: shardParam });

/** The ledger shard a checkpoint route signs or reads (shard 0 without one). */
export const ShardQuery = z.object({ shard: shardParam });

/** The place of a shard this deployment runs, or 400: an unknown shard is a bad request, not an empty chain. */
export function namedPlace(env: Env, shard: number): Place {
  const at = placeNumbered(env, shard);
  if (!at)
    throw new ApiError(400, "invalid_request", {
      issues: [{ path: "shard", code: "custom", message: "no such ledger shard" }],
    });
  return at;
}

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
    if (shard !== undefined) namedPlace(c.env, shard);
    return csvExportResponse(c.env, range, { shard });
  })
  .get("/console/audit", requireActor("console"), validate("query", ShardPageQuery), async (c) => {
    const { afterSeq, limit, shard } = c.req.valid("query");
    const store = { DB: namedPlace(c.env, shard).db, ARCHIVE: c.env.ARCHIVE };
    const rows = await firstAuditRows(store, limit, { afterSeq });
    return c.json({ events: rows, nextAfterSeq: rows.length === limit ? rows[rows.length - 1]!.seq : null });
  })
  // Every shard whose chain a verifier must walk: each is read with `?shard=k` on the routes above and below.
  .get("/console/audit/shards", requireActor("console"), (c) =>
    c.json({ shards: placementOf(c.env).each().map(shardLabel) }),
  )
  .get("/console/audit/verify", requireActor("console"), validate("query", VerifyQuery), async (c) => {
    const full = c.req.valid("query").full === "true";
    const settings = c.get("settings");
    return c.json(await verifyEveryShard(c.env, settings.proofs, { full }));
  });
