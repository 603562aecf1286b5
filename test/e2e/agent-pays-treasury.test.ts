import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callService, type DevServer, startDevServer } from "./dev-server";

// An agent pays one of this service's own charges through its x402 URL with an outbound payment
// (POST /agent/x402/payments, then the header sent to GET /charges/:id/x402, which settles it on the
// local chain). Money only moved inside the service: the settlement address paid the charge's
// address. The treasury reconciliation counts an authorized outbound payment as pending outflow and
// stays balanced; it must not read a shortfall for money the service itself sent.
describe("an outbound x402 payment and the treasury", () => {
  let dev: DevServer;
  let token: string;

  const call = (method: string, path: string, bearer: string | null, body?: unknown, headers = {}) =>
    callService(dev.url, method, path, bearer, body, headers);

  beforeAll(async () => {
    dev = await startDevServer();
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
  }, 300_000);
  afterAll(async () => {
    await dev?.stop();
  });

  it("paying the service's own charge from an agent's wallet leaves the treasury balanced", async () => {
    expect((await call("GET", "/console/treasury", token)).body.status).toBe("balanced");
    const merchant = await call("POST", "/merchants", token, { name: "own charges" });
    const agent = await call("POST", "/console/agents", token, {
      name: "buyer",
      policy: { allowedX402Hosts: ["127.0.0.1"] },
    });
    expect(agent.status, agent.text).toBe(201);
    const credited = await call("POST", `/console/agents/${agent.body.agentId}/credits`, token, {
      amountUsdCents: 500,
    });
    expect(credited.status, credited.text).toBe(200);
    const charge = await call("POST", "/merchant/charges", merchant.body.apiKey, { amountUsdCents: 150 });
    const resource = `${dev.url}/charges/${charge.body.chargeId}/x402`;
    const terms = await call("GET", `/charges/${charge.body.chargeId}/x402`, null);
    expect(terms.status).toBe(402);
    const paid = await call("POST", "/agent/x402/payments", agent.body.apiKey, {
      resource,
      paymentRequired: { x402Version: 1, accepts: terms.body.accepts },
    });
    expect(paid.status, paid.text).toBe(201);
    const settled = await call("GET", `/charges/${charge.body.chargeId}/x402`, null, undefined, {
      [paid.body.header.name]: paid.body.header.value,
    });
    expect(settled.status, settled.text).toBe(200);
    expect((await call("GET", `/charges/${charge.body.chargeId}`, merchant.body.apiKey)).body.status).toBe("paid");
    // Used on chain, not yet recorded: still balanced (the authorization is pending outflow).
    const meanwhile = await call("GET", "/console/treasury", token);
    expect(meanwhile.body.status, meanwhile.text).toBe("balanced");
    // The reconciliation (the dev cron, every 10 s) finds it settled; then nothing is left over.
    const paymentPath = `/agent/x402/payments/${paid.body.payment.paymentId}`;
    for (let k = 0; k < 60; k++) {
      if ((await call("GET", paymentPath, agent.body.apiKey)).body.payment.status === "settled") break;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    expect((await call("GET", paymentPath, agent.body.apiKey)).body.payment).toMatchObject({ status: "settled" });
    const treasury = await call("GET", "/console/treasury", token);
    expect(treasury.body, treasury.text).toMatchObject({ status: "balanced", differenceBaseUnits: "0" });
  });
});
