import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import type { X402Settings } from "../config/env";
import { placementOf } from "../ledger/place";
import { ApiError } from "../lib/errors";
import { log } from "../lib/log";
import { validate } from "../lib/validation";
import { dispatchAfterWrite } from "../webhooks/dispatch";
import { runTreasuryCheck } from "./check";
import { bookFunding, type FundingRefusal } from "./fundings";
import { listChecks } from "./history";
import { fundingView, storedCheckView, TransactionHash, treasuryView } from "./responses";

export const TreasuryChecksQuery = z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) });
export const FundingBody = z.object({ transaction: TransactionHash }).strict();

/** How each refusal of a funding is answered. */
const FUNDING_REFUSED: Record<FundingRefusal, 400 | 409> = {
  no_funding_transfer: 400,
  funding_already_booked: 409,
  funding_not_confirmed: 409,
  funding_already_counted: 409,
};

/** The deployment's chain settings, or 503: without them there is nothing on chain to reconcile. */
export function treasuryChain(x: X402Settings | null): X402Settings {
  if (!x) throw new ApiError(503, "treasury_not_configured");
  return x;
}

export const treasuryRoutes = new Hono<AppEnv>()
  /**
   * A check now, read live from the chain, and stored like the cron's: the operator's "check now".
   * A GET that writes, on purpose: it records what it found, and a shortfall it finds first is
   * announced (then fanned out at once, as a write's events are).
   */
  .get("/console/treasury", requireActor("console"), async (c) => {
    const check = await runTreasuryCheck(c.env, treasuryChain(c.get("settings").x402));
    if (check.announced)
      c.executionCtx.waitUntil(dispatchAfterWrite(c.env).catch((error) => log.warn("treasury_dispatch", { error })));
    return c.json(treasuryView(check));
  })
  /** The operator books a transaction that funded the settlement address as float (docs/operations.md#treasury). */
  .post("/console/treasury/fundings", requireActor("console"), validate("json", FundingBody), async (c) => {
    const x = treasuryChain(c.get("settings").x402);
    const booked = await bookFunding(
      c.env,
      x,
      c.req.valid("json").transaction as `0x${string}`,
      actorOf(c.get("actor"), "console").email,
      (funding) => answerInBatch(c, 201, fundingView(funding)),
    );
    if (!booked.ok) throw new ApiError(FUNDING_REFUSED[booked.reason], booked.reason);
    return c.json(fundingView(booked.funding), 201);
  })
  .get("/console/treasury/checks", requireActor("console"), validate("query", TreasuryChecksQuery), async (c) => {
    const checks = await listChecks(placementOf(c.env).control.db, c.req.valid("query").limit);
    return c.json({ checks: checks.map(storedCheckView) });
  });
