import { Hono } from "hono";
import { type Checkpoint, checkpointAt, checkpointPage, latestCheckpoint } from "../audit/checkpoint-rows";
import { namedPlace, ShardPageQuery, ShardQuery } from "../audit/routes";
import type { AppEnv } from "../auth/app-env";
import { requireActor } from "../auth/middleware";
import { ApiError } from "../lib/errors";
import { log } from "../lib/log";
import { validate } from "../lib/validation";
import { anchorCheckpoint } from "./anchoring";
import { makeCheckpoint } from "./checkpoints";

/** A checkpoint as the API shows it: `transaction` is null until it is on chain. */
export const checkpointView = (cp: Checkpoint) => ({
  seq: cp.seq,
  hash: cp.hash,
  fromSeq: cp.fromSeq,
  rowsRoot: cp.rowsRoot,
  signedAt: cp.signedAt,
  jws: cp.jws,
  kid: cp.kid,
  anchorStatus: cp.anchorStatus,
  transaction: cp.anchorStatus === "confirmed" ? cp.txHash : null,
  blockNumber: cp.anchorStatus === "confirmed" ? cp.blockNumber : null,
  anchoredBy: cp.anchorStatus === "confirmed" ? cp.anchorFrom : null,
  anchoredAt: cp.anchorStatus === "confirmed" ? cp.anchoredAt : null,
});

/** The place of the ledger shard the API names by its number (the k-th of each()), or 400 for one not run here. */
export const checkpointRoutes = new Hono<AppEnv>()
  /**
   * Signs a checkpoint of the head now (201), or answers the latest when the head has not moved
   * since (200), then takes its anchor one step on chain within the request.
   */
  .post("/console/audit/checkpoints", requireActor("console"), validate("query", ShardQuery), async (c) => {
    const { shard } = c.req.valid("query");
    const at = namedPlace(c.env, shard);
    const made = await makeCheckpoint(c.env, Date.now(), at);
    if (made.kind === "empty") throw new ApiError(409, "audit_chain_empty");
    try {
      await anchorCheckpoint(c.env, made.checkpoint, Date.now(), at);
    } catch (error) {
      // Signed and stored all the same: the cron takes the anchor on from here.
      log.warn("audit_anchor_request", { shard, seq: made.checkpoint.seq, error });
    }
    const checkpoint = (await checkpointAt(at.db, made.checkpoint.seq)) ?? made.checkpoint;
    return c.json({ checkpoint: checkpointView(checkpoint) }, made.kind === "created" ? 201 : 200);
  })
  .get("/console/audit/checkpoints", requireActor("console"), validate("query", ShardPageQuery), async (c) => {
    const { afterSeq, limit, shard } = c.req.valid("query");
    const page = await checkpointPage(namedPlace(c.env, shard).db, afterSeq, limit);
    return c.json({
      checkpoints: page.map(checkpointView),
      nextAfterSeq: page.length === limit ? page[page.length - 1]!.seq : null,
    });
  })
  .get("/audit/checkpoints/latest", requireActor("console"), validate("query", ShardQuery), async (c) => {
    const latest = await latestCheckpoint(namedPlace(c.env, c.req.valid("query").shard).db);
    if (!latest) throw new ApiError(404, "checkpoint_not_found");
    return c.json({ checkpoint: checkpointView(latest) });
  });
