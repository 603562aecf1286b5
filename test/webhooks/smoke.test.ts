import { describe, expect, it } from "vitest";
import { verifyWebhook } from "../../client/src/webhooks";
import { api, consoleToken } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { registerEndpoint, waitForReceived } from "../helpers/webhooks";

describe("webhook smoke", () => {
  it("delivers signed events and retries a failing receiver", async () => {
    const merchant = await createMerchant();
    const ok = await registerEndpoint("ok-smoke", { merchantId: merchant.merchantId });
    const flaky = await registerEndpoint("fail2-smoke", {
      events: ["charge.created"],
      merchantId: merchant.merchantId,
    });
    const agent = await createAgent({ credit: 1000 });
    const charge = await createCharge(merchant.apiKey, 100);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    const got = await waitForReceived("ok-smoke", (l) => l.length >= 3);
    const types = got.map((d) => JSON.parse(d.body).type).sort();
    expect(types).toEqual(["charge.created", "charge.succeeded", "payment.succeeded"]);
    for (const d of got) {
      expect(
        await verifyWebhook({ secret: ok.secret, header: d.headers["x-service-signature"], rawBody: d.body }),
      ).toMatchObject({ ok: true });
    }
    const retried = await waitForReceived("fail2-smoke", (l) => l.length >= 3);
    expect(new Set(retried.map((d) => JSON.parse(d.body).id)).size).toBe(1);
    const token = await consoleToken();
    let deliveries: any[] = [];
    for (let i = 0; i < 50; i++) {
      deliveries = (await api("GET", `/settings/webhooks/${flaky.id}/deliveries`, { token })).body.deliveries;
      if (deliveries[0]?.status === "delivered") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(deliveries[0]).toMatchObject({ status: "delivered", attempts: 3, lastStatusCode: 200 });
  });
});
