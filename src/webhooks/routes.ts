import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf, requireActor } from "../auth/middleware";
import { merchantExists } from "../db/merchants";
import { EVENT_TYPES } from "../ledger/outbox";
import { ApiError } from "../lib/errors";
import { checkPublicUrl } from "../lib/url-guard";
import { pathId, validate } from "../lib/validation";
import { type RedeliverOutcome, redeliver, webhooksDb } from "./dispatch";
import {
  createEndpoint,
  deliveryView,
  disableEndpoint,
  type EndpointRow,
  endpointView,
  getEndpoint,
  getUndeletedEndpoint,
  listDeliveries,
  listEndpoints,
  rotateEndpointSecret,
} from "./endpoints";

export const CreateBody = z
  .object({
    url: z.string().min(1).max(2048),
    events: z.array(z.enum(EVENT_TYPES)).max(EVENT_TYPES.length).optional(),
    merchantId: z.string().min(1).max(64).optional(),
  })
  .strict();
export const IdParam = z.object({ id: pathId });
export const DeliveryParam = z.object({ id: pathId, deliveryId: pathId });
export const DeliveriesQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) });
export const RotateBody = z
  .object({
    graceSeconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86_400)
      .default(86_400),
  })
  .strict();

const REDELIVER_REFUSED: Record<Exclude<RedeliverOutcome, "queued">, () => ApiError> = {
  endpoint_not_found: () => new ApiError(404, "webhook_endpoint_not_found"),
  delivery_not_found: () => new ApiError(404, "delivery_not_found"),
  not_redeliverable: () => new ApiError(409, "delivery_not_redeliverable"),
};

const urlIssue = (reason: string) =>
  new ApiError(400, "invalid_request", {
    issues: [{ path: "url", code: "invalid_url", message: `webhook URL refused: ${reason}` }],
  });

export const webhookRoutes = new Hono<AppEnv>()
  .use("/settings/webhooks/*", requireActor("console"))
  .post("/settings/webhooks", validate("json", CreateBody), async (c) => {
    const body = c.req.valid("json");
    const settings = c.get("settings");
    const verdict = checkPublicUrl(body.url, settings.environment);
    if (!verdict.ok) throw urlIssue(verdict.reason);
    const db = webhooksDb(c.env);
    if (body.merchantId && !(await merchantExists(db, body.merchantId))) {
      throw new ApiError(400, "invalid_request", {
        issues: [{ path: "merchantId", code: "unknown_merchant", message: "no such merchant" }],
      });
    }
    const events = [...new Set(body.events ?? [])];
    const createdView = ({ row, secret }: { row: EndpointRow; secret: string }) => ({
      id: row.id,
      url: row.url,
      events,
      merchantId: row.merchantId,
      secret,
    });
    const created = await createEndpoint(
      webhooksDb(c.env),
      settings.webhookSecretsKey,
      {
        url: verdict.url.toString(),
        events,
        merchantId: body.merchantId ?? null,
        createdBy: actorOf(c.get("actor"), "console").email,
      },
      (created) => answerInBatch(c, 201, createdView(created)),
    );
    return c.json(createdView(created), 201);
  })
  .get("/settings/webhooks", async (c) => {
    return c.json({ endpoints: (await listEndpoints(webhooksDb(c.env))).map(endpointView) });
  })
  .delete("/settings/webhooks/:id", validate("param", IdParam), async (c) => {
    if (!(await disableEndpoint(webhooksDb(c.env), c.req.valid("param").id)))
      throw new ApiError(404, "webhook_endpoint_not_found");
    return c.json({ id: c.req.valid("param").id, deleted: true });
  })
  // The body may be left out (docs/walkthrough.md: `curl -X POST .../rotate-secret`): every field has a default.
  .post(
    "/settings/webhooks/:id/rotate-secret",
    validate("param", IdParam),
    validate("json", RotateBody, { optionalBody: true }),
    async (c) => {
      const db = webhooksDb(c.env);
      const endpoint = await getEndpoint(db, c.req.valid("param").id);
      if (!endpoint) throw new ApiError(404, "webhook_endpoint_not_found");
      const rotatedView = (rotated: { secret: string; previousSecretExpiresAt: string | null }) => ({
        id: endpoint.id,
        secret: rotated.secret,
        previousSecretExpiresAt: rotated.previousSecretExpiresAt,
      });
      const rotated = await rotateEndpointSecret(
        db,
        c.get("settings").webhookSecretsKey,
        endpoint,
        c.req.valid("json").graceSeconds,
        (rotated) => answerInBatch(c, 200, rotatedView(rotated)),
      );
      return c.json(rotatedView(rotated));
    },
  )
  .get(
    "/settings/webhooks/:id/deliveries",
    validate("param", IdParam),
    validate("query", DeliveriesQuery),
    async (c) => {
      const db = webhooksDb(c.env);
      // Also an endpoint the service disabled: its failed deliveries are what an operator comes to read.
      const endpoint = await getUndeletedEndpoint(db, c.req.valid("param").id);
      if (!endpoint) throw new ApiError(404, "webhook_endpoint_not_found");
      return c.json({
        deliveries: (await listDeliveries(db, endpoint.id, c.req.valid("query").limit)).map(deliveryView),
      });
    },
  )
  .post("/settings/webhooks/:id/deliveries/:deliveryId/redeliver", validate("param", DeliveryParam), async (c) => {
    const { id, deliveryId } = c.req.valid("param");
    const outcome = await redeliver(c.env, id, deliveryId);
    if (outcome !== "queued") throw REDELIVER_REFUSED[outcome]();
    return c.json({ id: deliveryId, status: "pending" }, 202);
  });
