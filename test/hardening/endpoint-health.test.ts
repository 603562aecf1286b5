import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { buildApp } from "../../src/app";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant } from "../helpers/factories";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";

const deliveriesOf = async (endpointId: string) => {
  const row = await env.DB.prepare("SELECT disabled_at AS disabledAt FROM webhook_endpoints WHERE id = ?")
    .bind(endpointId)
    .first<{ disabledAt: string | null }>();
  return row;
};

describe("webhook endpoint health", () => {
  it("410 Gone disables the endpoint at once and raises an operator event", async () => {
    const merchant = await createMerchant();
    const gone = await registerEndpoint("gone-forever", {
      merchantId: merchant.merchantId,
      events: ["charge.created"],
    });
    await createCharge(merchant.apiKey, 10);
    await waitForReceived("gone-forever", (list) => list.length >= 1);
    const deadline = Date.now() + 15_000;
    let disabledAt: string | null = null;
    while (!disabledAt && Date.now() < deadline) {
      disabledAt = (await deliveriesOf(gone.id))?.disabledAt ?? null;
      if (!disabledAt) await new Promise((r) => setTimeout(r, 100));
    }
    expect(disabledAt).not.toBeNull();
    // One attempt only: 410 is final.
    const attempts = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ?",
    )
      .bind(gone.id)
      .first<{ n: number }>();
    expect(attempts?.n).toBe(1);
    const event = await env.DB.prepare(
      "SELECT data FROM outbox_events WHERE type = 'endpoint.disabled' AND data LIKE ?",
    )
      .bind(`%${gone.id}%`)
      .first<{ data: string }>();
    expect(JSON.parse(event!.data)).toEqual({ endpointId: gone.id, reason: "gone" });
    const list = await api("GET", "/settings/webhooks", { token: await consoleToken() });
    expect(list.body.endpoints.map((e: { id: string }) => e.id)).not.toContain(gone.id);
  });
});

describe("Durable Object overload", () => {
  it("answers 503 with Retry-After and does not retry", async () => {
    const agent = await createAgent({ credit: 100 });
    const merchant = await createMerchant();
    const charge = await createCharge(merchant.apiKey, 10);
    let calls = 0;
    const overloaded = Object.assign(new Error("Durable Object is overloaded. Too many requests queued."), {
      overloaded: true,
    });
    const wallet = {
      getByName: () => ({
        payCharge: async () => {
          calls++;
          throw overloaded;
        },
      }),
    };
    const ctx = {
      waitUntil: () => undefined,
      passThroughOnException: () => undefined,
      props: {},
    } as unknown as ExecutionContext;
    const res = await buildApp().fetch(
      new Request(`http://service.test/charges/${charge.chargeId}/pay`, {
        method: "POST",
        headers: { authorization: `Bearer ${agent.apiKey}` },
      }),
      { ...env, WALLET: wallet as unknown as typeof env.WALLET },
      ctx,
    );
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(await res.json()).toEqual({ error: "overloaded" });
    expect(calls).toBe(1);
  });
});
