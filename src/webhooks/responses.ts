import { z } from "zod";
import { EVENT_TYPES } from "../ledger/outbox";
import { Cents, named, prefixed, Timestamp } from "../lib/api-shapes";

/** Response bodies: Webhook endpoints and deliveries. */

const EventType = z.enum(EVENT_TYPES);

export const WebhookEndpointCreated = named(
  "WebhookEndpointCreated",
  z.strictObject({
    id: prefixed("webhookEndpoint"),
    url: z.string(),
    events: z.array(EventType).describe("Empty means every event kind."),
    merchantId: prefixed("merchant").nullable(),
    secret: prefixed("webhookSecret").describe("Shown once: the HMAC-SHA256 key of the X-Service-Signature header."),
  }),
);

export const WebhookEndpoint = named(
  "WebhookEndpoint",
  z.strictObject({
    id: prefixed("webhookEndpoint"),
    url: z.string(),
    events: z.array(EventType),
    merchantId: prefixed("merchant").nullable(),
    createdAt: Timestamp,
  }),
);

export const WebhookEndpointList = named(
  "WebhookEndpointList",
  z.strictObject({ endpoints: z.array(WebhookEndpoint) }),
);

export const WebhookEndpointDeleted = named(
  "WebhookEndpointDeleted",
  z.strictObject({ id: prefixed("webhookEndpoint"), deleted: z.literal(true) }),
);

export const WebhookSecretRotated = named(
  "WebhookSecretRotated",
  z.strictObject({
    id: prefixed("webhookEndpoint"),
    secret: prefixed("webhookSecret"),
    previousSecretExpiresAt: Timestamp.nullable(),
  }),
);

export const WebhookDelivery = named(
  "WebhookDelivery",
  z.strictObject({
    id: z.string(),
    eventId: prefixed("webhookEvent"),
    type: EventType,
    status: z.enum(["pending", "delivered", "failed"]),
    attempts: Cents,
    lastStatusCode: z.number().int().nullable(),
    lastError: z.string().nullable(),
    nextAttemptAt: Timestamp.nullable(),
    createdAt: Timestamp,
    deliveredAt: Timestamp.nullable(),
  }),
);

export const WebhookDeliveryList = named(
  "WebhookDeliveryList",
  z.strictObject({ deliveries: z.array(WebhookDelivery) }),
);

export const RedeliveryQueued = named(
  "RedeliveryQueued",
  z.strictObject({ id: z.string(), status: z.literal("pending") }),
);

/** The body a receiver gets; documented for the client's `verifyWebhook`. */
export const WebhookEvent = named(
  "WebhookEvent",
  z.strictObject({
    id: prefixed("webhookEvent"),
    type: EventType,
    createdAt: Timestamp,
    data: z.record(z.string(), z.unknown()),
  }),
  'The envelope POSTed to a webhook endpoint, signed in X-Service-Signature (`t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`).',
);
