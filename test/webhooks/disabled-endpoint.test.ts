import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { api, consoleToken } from "../helpers/api";
import { createCharge, createMerchant } from "../helpers/factories";
import { waitFor } from "../helpers/wait";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";

/*
 * An endpoint the service disabled (410 Gone, or failing for days) keeps its
 * deliveries readable: the failed ones are what an operator comes to look at
 * (guarantees.md). One removed with DELETE answers 404, for redelivery too
 * (decisions.md). Both set `disabled_at`; only the service's disabling writes
 * an `endpoint.disabled` event at that instant.
 */

const RUN = crypto.randomUUID().slice(0, 8);
const DAY_MS = 86_400_000;

const deliveries = async (id: string, token?: string) =>
  api("GET", `/settings/webhooks/${id}/deliveries`, { token: token ?? (await consoleToken()) });
const redeliver = async (id: string, deliveryId: string) =>
  api("POST", `/settings/webhooks/${id}/deliveries/${deliveryId}/redeliver`, { token: await consoleToken() });
const remove = async (id: string) => api("DELETE", `/settings/webhooks/${id}`, { token: await consoleToken() });
const listedIds = async () =>
  (await api("GET", "/settings/webhooks", { token: await consoleToken() })).body.endpoints.map(
    (e: { id: string }) => e.id,
  ) as string[];

/** A merchant with an endpoint for `charge.created` at the receiver's hook `<prefix>-RUN`, and one charge that makes a delivery to it. */
async function endpointWithOneDelivery(prefix: string) {
  const merchant = await createMerchant();
  const name = `${prefix}-${RUN}`;
  const endpoint = await registerEndpoint(name, { merchantId: merchant.merchantId, events: ["charge.created"] });
  await createCharge(merchant.apiKey, 10);
  return { merchant, name, endpoint };
}

/** The endpoint's first delivery, once it has reached `status`. */
const firstDeliveryOnce = async (endpointId: string, status: string) =>
  (
    (await waitFor(
      `first delivery ${status}`,
      async () => (await deliveries(endpointId)).body.deliveries,
      (list) => list[0]?.status === status,
    )) as { id: string }[]
  )[0]!;

const disabledAtOf = async (endpointId: string) =>
  (
    await env.DB.prepare("SELECT disabled_at AS disabledAt FROM webhook_endpoints WHERE id = ?")
      .bind(endpointId)
      .first<{ disabledAt: string | null }>()
  )?.disabledAt ?? null;

const waitDisabled = (endpointId: string) =>
  waitFor(
    `endpoint ${endpointId} disabled`,
    () => disabledAtOf(endpointId),
    (at) => at !== null,
  );

const disabledEventOf = async (endpointId: string) => {
  const row = await env.DB.prepare(
    "SELECT data FROM outbox_events WHERE type = 'endpoint.disabled' AND json_extract(data, '$.endpointId') = ?",
  )
    .bind(endpointId)
    .first<{ data: string }>();
  return row ? (JSON.parse(row.data) as { endpointId: string; reason: string }) : null;
};

const deliveryRow = (id: string) =>
  env.DB.prepare("SELECT status, attempts FROM webhook_deliveries WHERE id = ?")
    .bind(id)
    .first<{ status: string; attempts: number }>();

describe("an endpoint disabled by the service", () => {
  it("after 410 Gone: its deliveries are still listed, not redeliverable, and DELETE then removes it (404)", async () => {
    const { merchant, name, endpoint } = await endpointWithOneDelivery("gone-disabled");
    await waitForReceived(name, (list) => list.length >= 1);
    await waitDisabled(endpoint.id);
    expect(await disabledEventOf(endpoint.id)).toEqual({ endpointId: endpoint.id, reason: "gone" });

    const res = await deliveries(endpoint.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body.deliveries).toHaveLength(1);
    const [failed] = res.body.deliveries;
    expect(failed).toMatchObject({
      type: "charge.created",
      status: "failed",
      attempts: 1,
      lastStatusCode: 410,
      lastError: "http_410",
      deliveredAt: null,
    });
    // The console's attempt page reads by delivery id: the failed attempt is there to look at.
    const attempts = await env.DB.prepare(
      "SELECT status_code AS statusCode, error FROM webhook_attempts WHERE delivery_id = ?",
    )
      .bind(failed.id)
      .all();
    expect(attempts.results).toEqual([{ statusCode: 410, error: "http_410" }]);

    // Still out of the list, as before.
    expect(await listedIds()).not.toContain(endpoint.id);

    // Nothing is sent to a disabled endpoint, so nothing is queued: 409, and the delivery is untouched.
    const again = await redeliver(endpoint.id, failed.id);
    expect(again.status, again.text).toBe(409);
    expect(again.body).toEqual({ error: "delivery_not_redeliverable" });
    expect(await deliveryRow(failed.id)).toEqual({ status: "failed", attempts: 1 });

    // Console only, as for any endpoint.
    const asMerchant = await deliveries(endpoint.id, merchant.apiKey);
    expect(asMerchant.status).toBe(403);
    expect(asMerchant.body.error).toBe("credential_not_allowed");
    expect((await api("GET", `/settings/webhooks/${endpoint.id}/deliveries`)).status).toBe(401);

    // DELETE removes it like an active one: then the deliveries API answers 404.
    const removed = await remove(endpoint.id);
    expect(removed.status, removed.text).toBe(200);
    expect(removed.body).toEqual({ id: endpoint.id, deleted: true });
    const gone = await deliveries(endpoint.id);
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ error: "webhook_endpoint_not_found" });
    expect((await remove(endpoint.id)).status).toBe(404);
  });

  it("after failing for days: every failed delivery is still listed", async () => {
    const { merchant, endpoint } = await endpointWithOneDelivery("fail-days");
    const first = await firstDeliveryOnce(endpoint.id, "failed");
    expect(await disabledAtOf(endpoint.id)).toBeNull();
    // The first failure happened four days ago: the next delivery that fails for good disables the endpoint.
    await env.DB.prepare("UPDATE webhook_deliveries SET created_at = ? WHERE id = ?")
      .bind(new Date(Date.now() - 4 * DAY_MS).toISOString(), first.id)
      .run();

    await createCharge(merchant.apiKey, 20);
    await waitDisabled(endpoint.id);
    expect(await disabledEventOf(endpoint.id)).toEqual({ endpointId: endpoint.id, reason: "failing" });

    const res = await deliveries(endpoint.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body.deliveries).toHaveLength(2);
    for (const delivery of res.body.deliveries)
      expect(delivery).toMatchObject({ status: "failed", lastStatusCode: 500, lastError: "http_500" });
    expect(await listedIds()).not.toContain(endpoint.id);
  });
});

describe("an endpoint removed with DELETE", () => {
  it("answers 404 for its deliveries, and a delivery of it is not sent again", async () => {
    const { endpoint } = await endpointWithOneDelivery("ok-deleted");
    const delivered = await firstDeliveryOnce(endpoint.id, "delivered");

    expect((await remove(endpoint.id)).status).toBe(200);
    const res = await deliveries(endpoint.id);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: "webhook_endpoint_not_found" });
    // Removed is unknown here too, as its deliveries list says: 404, and nothing is sent.
    const again = await redeliver(endpoint.id, delivered.id);
    expect(again.status, again.text).toBe(404);
    expect(again.body).toEqual({ error: "webhook_endpoint_not_found" });
    expect(await deliveryRow(delivered.id)).toEqual({ status: "delivered", attempts: 1 });
  });
});
