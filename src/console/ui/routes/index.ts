import { Hono } from "hono";
import type { AppEnv } from "../../../auth/app-env";
import { requirePageSession } from "../session";
import { agentRoutes } from "./agents";
import { approvalRoutes } from "./approvals";
import { chargePageRoutes } from "./charges";
import { kytRoutes } from "./kyt";
import { merchantRoutes } from "./merchants";
import { payoutPageRoutes } from "./payouts";
import { reportRoutes } from "./reports";
import { signInRoutes } from "./sign-in";
import { treasuryPageRoutes } from "./treasury";
import { userRoutes } from "./users";
import { webhookRoutes } from "./webhooks";

/**
 * The console's pages. Everything under /console/ui needs a page session, checked here once,
 * before any page's routes: the page routers below are mounted only behind this check.
 */
export const consoleUiRoutes = new Hono<AppEnv>()
  .route("/", signInRoutes)
  .use("/console/ui", requirePageSession)
  .use("/console/ui/*", requirePageSession)
  .route("/", reportRoutes)
  .route("/", merchantRoutes)
  .route("/", payoutPageRoutes)
  .route("/", treasuryPageRoutes)
  .route("/", chargePageRoutes)
  .route("/", agentRoutes)
  .route("/", approvalRoutes)
  .route("/", webhookRoutes)
  .route("/", kytRoutes)
  .route("/", userRoutes);
