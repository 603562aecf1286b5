import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { checkWebhookUrl } from "../../src/webhooks/url-guard";
import { api, consoleToken } from "../helpers/api";
import { createMerchant } from "../helpers/factories";
import { receiverUrl } from "../helpers/webhooks";

describe("webhook endpoints API", () => {
  it("POST /settings/webhooks: 201 with the secret shown once; the list has no secrets; stored encrypted", async () => {
    const token = await consoleToken();
    const res = await api("POST", "/settings/webhooks", { token, body: { url: `${receiverUrl()}/hooks/ok-api`, events: ["charge.created", "charge.succeeded"] } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^wh_/), url: `${receiverUrl()}/hooks/ok-api`, events: ["charge.created", "charge.succeeded"], merchantId: null, secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{43}$/) });
    const list = await api("GET", "/settings/webhooks", { token });
    expect(list.body.endpoints.find((e: { id: string }) => e.id === res.body.id)).toEqual({ id: res.body.id, url: res.body.url, events: res.body.events, merchantId: null, createdAt: expect.any(String) });
    expect(list.text).not.toContain("whsec_");
    const row = await env.DB.prepare("SELECT * FROM webhook_endpoints WHERE id = ?").bind(res.body.id).first<Record<string, unknown>>();
    expect(JSON.stringify(row)).not.toContain(res.body.secret.slice(6));
  });

  it.each([
    ["an unknown event kind", { url: "https://example.com/h", events: ["charge.refunded"] }],
    ["a missing url", { events: [] }],
    ["a non-URL", { url: "not a url" }],
    ["an unknown field", { url: "https://example.com/h", secret: "whsec_mine" }],
    ["an unknown merchant", { url: "https://example.com/h", merchantId: "mch_nobody" }],
  ])("400 for %s", async (_name, body) => {
    const res = await api("POST", "/settings/webhooks", { token: await consoleToken(), body });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_request");
  });

  it("omitted events mean all; DELETE removes the endpoint (404 the second time); deliveries of unknown endpoints 404", async () => {
    const token = await consoleToken();
    const merchant = await createMerchant();
    const res = await api("POST", "/settings/webhooks", { token, body: { url: "https://hooks.example.com/in", merchantId: merchant.merchantId } });
    expect(res.body.events).toEqual([]);
    expect((await api("DELETE", `/settings/webhooks/${res.body.id}`, { token })).status).toBe(200);
    expect((await api("DELETE", `/settings/webhooks/${res.body.id}`, { token })).status).toBe(404);
    const list = await api("GET", "/settings/webhooks", { token });
    expect(list.body.endpoints.map((e: { id: string }) => e.id)).not.toContain(res.body.id);
    expect((await api("GET", `/settings/webhooks/${res.body.id}/deliveries`, { token })).status).toBe(404);
  });
});

describe("SSRF guard in production", () => {
  const refused = [
    "http://example.com/hook",
    "https://127.0.0.1/x",
    "https://127.1.2.3/x",
    "https://localhost/x",
    "https://api.localhost/x",
    "https://10.0.0.1/x",
    "https://172.16.0.1/x",
    "https://172.31.255.255/x",
    "https://192.168.1.1/x",
    "https://169.254.169.254/latest/meta-data",
    "https://100.64.0.1/x",
    "https://0.0.0.0/x",
    "https://224.0.0.1/x",
    "https://[::1]/x",
    "https://[::]/x",
    "https://[fe80::1]/x",
    "https://[fc00::1]/x",
    "https://[::ffff:127.0.0.1]/x",
    "https://[::ffff:7f00:1]/x",
    "https://[::ffff:10.0.0.1]/x",
    "https://2130706433/x",
    "https://0177.0.0.1/x",
    "https://0x7f.0.0.1/x",
    "https://metadata.google.internal/x",
    "https://service.internal/x",
    "https://intranet/x",
    "https://user:pass@example.com/x",
  ];
  it.each(refused)("refuses %s", (url) => {
    expect(checkWebhookUrl(url, "production").ok).toBe(false);
  });

  it.each(["https://example.com/hook", "https://93.184.216.34/x", "https://[2606:4700::1]/x"])("accepts %s", (url) => {
    expect(checkWebhookUrl(url, "production").ok).toBe(true);
  });

  it("local development and tests also take plain http to loopback, and nothing else private", () => {
    for (const environment of ["development", "test"] as const) {
      expect(checkWebhookUrl("http://127.0.0.1:8080/x", environment).ok).toBe(true);
      expect(checkWebhookUrl("http://10.0.0.1/x", environment).ok).toBe(false);
      expect(checkWebhookUrl("http://192.168.1.5/x", environment).ok).toBe(false);
    }
  });
});
