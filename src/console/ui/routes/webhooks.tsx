import { Hono } from "hono";
import type { AppEnv } from "../../../auth/app-env";
import { EVENT_TYPES } from "../../../ledger/outbox";
import { placementOf } from "../../../ledger/place";
import { checkPublicUrl } from "../../../lib/url-guard";
import { consoleMerchantView, getMerchant, listMerchants } from "../../../merchants/service";
import { type RedeliverOutcome, redeliver, webhooksDb } from "../../../webhooks/dispatch";
import {
  createEndpoint,
  deliveryView,
  endpointView,
  getUndeletedEndpoint,
  listAttempts,
  listDeliveries,
  listEndpoints,
} from "../../../webhooks/endpoints";
import { CreateBody as CreateEndpointBody } from "../../../webhooks/routes";
import { ShownOnce } from "../layout";
import { AttemptsPage, DeliveriesPage, WebhooksPage } from "../pages/webhooks";
import { back, csrfOf, emailOf, render, type Ui } from "../render";
import { parseForm } from "../session";

const REDELIVER_NOTICE: Record<Exclude<RedeliverOutcome, "endpoint_not_found">, string> = {
  queued: "Queued for redelivery.",
  delivery_not_found: "No such delivery for this endpoint.",
  not_redeliverable: "Only a delivered or failed delivery to an active endpoint can be sent again.",
};

/** The endpoints page (with a secret shown once above it, after a creation). */
async function webhooksPage(c: Ui, extra: { notice?: string; error?: string } = {}, shown?: unknown) {
  const control = placementOf(c.env).control.db;
  const [endpoints, merchants] = await Promise.all([listEndpoints(control), listMerchants(control, 500)]);
  return render(
    c,
    "Webhooks",
    "/console/ui/webhooks",
    <>
      {shown as never}
      <WebhooksPage
        csrf={csrfOf(c)}
        endpoints={endpoints.map(endpointView)}
        merchants={merchants.map(consoleMerchantView)}
      />
    </>,
    extra,
  );
}

/** Webhooks: the endpoints, adding one, its deliveries and their attempts, and sending one again. */
export const webhookRoutes = new Hono<AppEnv>()
  .get("/console/ui/webhooks", (c) => webhooksPage(c))
  .post("/console/ui/webhooks", async (c) => {
    const body = await parseForm(c, { all: true });
    const url = typeof body.url === "string" ? body.url.trim() : "";
    const events = [
      ...new Set(
        [body.events ?? []]
          .flat()
          .filter(
            (e): e is (typeof EVENT_TYPES)[number] =>
              typeof e === "string" && (EVENT_TYPES as readonly string[]).includes(e),
          ),
      ),
    ];
    const merchantId = typeof body.merchantId === "string" && body.merchantId ? body.merchantId : null;
    const settings = c.get("settings");
    const input = CreateEndpointBody.safeParse({ url, events, merchantId: merchantId ?? undefined });
    const verdict = checkPublicUrl(url, settings.environment);
    if (!input.success)
      return webhooksPage(c, {
        error: "Check the form: a URL of up to 2,048 characters, and a merchant from the list.",
      });
    if (!verdict.ok) return webhooksPage(c, { error: `That URL is refused (${verdict.reason}).` });
    if (merchantId && !(await getMerchant(placementOf(c.env).control.db, merchantId)))
      return webhooksPage(c, { error: "No such merchant." });
    const { row, secret } = await createEndpoint(webhooksDb(c.env), settings.webhookSecretsKey, {
      url: verdict.url.toString(),
      events,
      merchantId,
      createdBy: emailOf(c),
    });
    return webhooksPage(
      c,
      { notice: `Endpoint ${row.id} created.` },
      <ShownOnce label={`Signing secret for ${row.url}`} value={secret} id="webhook-secret" />,
    );
  })
  .get("/console/ui/webhooks/:id", async (c) => {
    // As the deliveries API: an endpoint the service disabled keeps its deliveries readable.
    const endpoint = await getUndeletedEndpoint(webhooksDb(c.env), c.req.param("id"));
    if (!endpoint) return c.notFound();
    const deliveries = (await listDeliveries(webhooksDb(c.env), endpoint.id, 100)).map(deliveryView);
    return render(
      c,
      `Deliveries to ${endpoint.url}`,
      "/console/ui/webhooks",
      <DeliveriesPage csrf={csrfOf(c)} endpointId={endpoint.id} deliveries={deliveries} />,
    );
  })
  .get("/console/ui/webhooks/:id/deliveries/:deliveryId", async (c) => {
    const attempts = await listAttempts(webhooksDb(c.env), c.req.param("deliveryId"));
    return render(c, "Delivery attempts", "/console/ui/webhooks", <AttemptsPage attempts={attempts} />);
  })
  .post("/console/ui/webhooks/:id/deliveries/:deliveryId/redeliver", async (c) => {
    const { id, deliveryId } = c.req.param();
    const outcome = await redeliver(c.env, id, deliveryId);
    // A removed endpoint has no page to go back to.
    if (outcome === "endpoint_not_found") return back(c, ["webhooks"], "No such webhook endpoint.");
    return back(c, ["webhooks", id], REDELIVER_NOTICE[outcome]);
  });
