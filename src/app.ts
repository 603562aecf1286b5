import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { agentRoutes } from "./agents/routes";
import { approvalRoutes } from "./approvals/routes";
import { auditRoutes } from "./audit/routes";
import type { AppEnv } from "./auth/app-env";
import { chargeRoutes } from "./charges/routes";
import { checkoutRoutes } from "./checkout/routes";
import { checkpointRoutes } from "./checkpoints/routes";
import { settingsOf } from "./config/env";
import { consoleAuthRoutes } from "./console/auth-routes";
import { consoleUiRoutes } from "./console/ui/routes";
import { kytRoutes } from "./kyt/routes";
import { ApiError } from "./lib/errors";
import { log } from "./lib/log";
import { enforceRateLimit } from "./lib/rate-limit";
import { mcpRoutes } from "./mcp/routes";
import { merchantRoutes } from "./merchants/routes";
import { openApiRoutes } from "./openapi/routes";
import { paylinkRoutes } from "./paylinks/routes";
import { payoutRoutes } from "./payouts/routes";
import { proofRoutes } from "./proofs/routes";
import { receiptRoutes } from "./receipts/routes";
import { refundRoutes } from "./refunds/routes";
import { treasuryRoutes } from "./treasury/routes";
import { dispatchAfterWrite } from "./webhooks/dispatch";
import { webhookRoutes } from "./webhooks/routes";
import { facilitatorRoutes } from "./x402/facilitator-routes";
import { agentX402Routes } from "./x402/outbound/routes";
import { x402Routes } from "./x402/routes";

/** The largest request body accepted (64 KiB). */
export const MAX_BODY_BYTES = 64 * 1024;

async function dispatchInBackground(env: AppEnv["Bindings"]) {
  try {
    await dispatchAfterWrite(env);
  } catch (error) {
    // The cron picks up whatever this missed; nothing is lost.
    log.warn("dispatch_after_request", { error });
  }
}

/** Builds the HTTP app: request id and settings, the domain routers, one error handler. */
export function buildApp() {
  const app = new Hono<AppEnv>();

  app.use(async (c, next) => {
    const requestId = c.req.header("cf-ray") ?? crypto.randomUUID();
    c.set("requestId", requestId);
    c.set("settings", settingsOf(c.env));
    await enforceRateLimit(c.env.CLIENT_RATE_LIMIT, `client:${c.req.header("cf-connecting-ip") ?? "local"}`);
    await next();
    c.header("x-request-id", requestId);
    // A write may have added outbox events: fan them out now rather than at the next cron tick.
    // x402 settles on GET too (official clients retry with their first method), so a payment header counts as a write.
    const writes =
      (c.req.method !== "GET" && c.req.method !== "HEAD") ||
      c.req.header("x-payment") !== undefined ||
      c.req.header("payment-signature") !== undefined;
    if (writes) c.executionCtx.waitUntil(dispatchInBackground(c.env));
  });

  // Bodies are small JSON; anything larger is refused before it is read.
  app.use(bodyLimit({ maxSize: MAX_BODY_BYTES, onError: (c) => c.json({ error: "payload_too_large" }, 413) }));
  // Idempotency-Key is handled by each route's requireActor, after the credential is admitted (auth/idempotency.ts).

  app.route("/", consoleAuthRoutes);
  app.route("/", consoleUiRoutes);
  app.route("/", merchantRoutes);
  app.route("/", payoutRoutes);
  app.route("/", refundRoutes);
  app.route("/", kytRoutes);
  app.route("/", x402Routes);
  app.route("/", facilitatorRoutes);
  app.route("/", chargeRoutes);
  app.route("/", checkoutRoutes);
  app.route("/", paylinkRoutes);
  app.route("/", agentRoutes);
  app.route("/", agentX402Routes);
  app.route("/", mcpRoutes);
  app.route("/", approvalRoutes);
  app.route("/", auditRoutes);
  app.route("/", checkpointRoutes);
  app.route("/", proofRoutes);
  app.route("/", receiptRoutes);
  app.route("/", webhookRoutes);
  app.route("/", openApiRoutes);
  app.route("/", treasuryRoutes);

  app.notFound((c) => c.json({ error: "not_found" }, 404));

  app.onError((error, c) => {
    if (error instanceof ApiError) {
      for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
      return c.json({ ...error.extra, error: error.error }, error.status);
    }
    if (typeof error === "object" && error !== null && (error as { overloaded?: unknown }).overloaded === true) {
      // A Durable Object shedding load: tell the client when to come back; nothing is retried blindly here.
      c.header("Retry-After", "1");
      return c.json({ error: "overloaded" }, 503);
    }
    if (error instanceof HTTPException && error.status < 500) {
      // Hono's own 4xx (malformed JSON and the like) in our error shape.
      return c.json(
        { error: "invalid_request", issues: [{ path: "", code: "malformed", message: error.message }] },
        400,
      );
    }
    const requestId = c.get("requestId") ?? "unknown";
    // Only the error itself is logged; requests carry credentials and are never logged.
    log.error("request_failed", { requestId, error });
    return c.json({ error: "internal_error", requestId }, 500);
  });

  return app;
}
