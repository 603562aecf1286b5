import { error, INVALID, json, type Operation } from "../lib/api-operation";
import { body } from "../lib/api-shapes";
import {
  RedeliveryQueued,
  WebhookDeliveryList,
  WebhookEndpointCreated,
  WebhookEndpointDeleted,
  WebhookEndpointList,
  WebhookSecretRotated,
} from "./responses";
import { CreateBody, DeliveriesQuery, DeliveryParam, IdParam, RotateBody } from "./routes";

/** Webhook endpoints and their deliveries. */
export const WEBHOOK_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/settings/webhooks",
    operationId: "createWebhookEndpoint",
    summary: "Add a webhook endpoint",
    description:
      "The signing secret is shown once. With `merchantId`, only that merchant's events; without, every event.",
    tag: "Webhook endpoints",
    auth: "console",
    body: body("CreateWebhookEndpointRequest", CreateBody),
    responses: { 201: json(WebhookEndpointCreated, "Created."), 400: INVALID },
  },
  {
    method: "get",
    path: "/settings/webhooks",
    operationId: "listWebhookEndpoints",
    summary: "List webhook endpoints",
    tag: "Webhook endpoints",
    auth: "console",
    responses: { 200: json(WebhookEndpointList, "Endpoints, without secrets.") },
  },
  {
    method: "delete",
    path: "/settings/webhooks/:id",
    operationId: "deleteWebhookEndpoint",
    summary: "Remove a webhook endpoint",
    tag: "Operator extras",
    auth: "console",
    params: IdParam,
    responses: {
      200: json(WebhookEndpointDeleted, "Removed; nothing more is delivered to it."),
      404: error("`webhook_endpoint_not_found`.", "webhook_endpoint_not_found"),
    },
  },
  {
    method: "post",
    path: "/settings/webhooks/:id/rotate-secret",
    operationId: "rotateWebhookSecret",
    summary: "Rotate an endpoint's signing secret",
    description: "During the grace period deliveries carry a signature with each secret.",
    tag: "Operator extras",
    auth: "console",
    params: IdParam,
    body: body("RotateWebhookSecretRequest", RotateBody),
    bodyOptional: true,
    responses: {
      200: json(WebhookSecretRotated, "The new secret, shown once."),
      400: INVALID,
      404: error("`webhook_endpoint_not_found`.", "webhook_endpoint_not_found"),
    },
  },
  {
    method: "get",
    path: "/settings/webhooks/:id/deliveries",
    operationId: "listWebhookDeliveries",
    summary: "An endpoint's recent deliveries",
    tag: "Webhook endpoints",
    auth: "console",
    params: IdParam,
    query: DeliveriesQuery,
    responses: {
      200: json(WebhookDeliveryList, "Deliveries, newest first."),
      400: INVALID,
      404: error("`webhook_endpoint_not_found`.", "webhook_endpoint_not_found"),
    },
  },
  {
    method: "post",
    path: "/settings/webhooks/:id/deliveries/:deliveryId/redeliver",
    operationId: "redeliverWebhook",
    summary: "Send a delivery again",
    tag: "Operator extras",
    auth: "console",
    params: DeliveryParam,
    responses: {
      202: json(RedeliveryQueued, "Queued."),
      404: error(
        "`webhook_endpoint_not_found` (unknown, or removed with DELETE), or `delivery_not_found` (unknown, or another endpoint's).",
        "webhook_endpoint_not_found",
        "delivery_not_found",
      ),
      409: error(
        "Only a delivered or failed delivery to an endpoint that is not disabled can be sent again (`delivery_not_redeliverable`).",
        "delivery_not_redeliverable",
      ),
    },
  },
];
