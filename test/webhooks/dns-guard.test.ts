import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { settingsOf } from "../../src/config/env";
import { checkDestination, isForbiddenAddress } from "../../src/lib/dns-guard";
import { api, consoleToken } from "../helpers/api";
import { createCharge, createMerchant } from "../helpers/factories";
import { PRODUCTION_LIKE_RECEIPT_KEY } from "../helpers/receipt-keys";
import { receiverUrl } from "../helpers/webhooks";

/*
 * The send-time SSRF guard (issue 7): names are resolved right before each
 * POST through a DNS-over-HTTPS resolver (here the receiver's stand-in,
 * test/setup/receiver.global.ts), and a name that resolves to any address we
 * never call gets no POST, however it looked when it was registered.
 */
const production = () => ({
  environment: "production" as const,
  webhookDnsResolverUrl: `${receiverUrl()}/dns-query`,
  webhookTimeoutMs: 2000,
});

describe("checkDestination in production", () => {
  const refused: [string, string][] = [
    ["a name with one private address among public ones (rebinding)", "https://rebind.example.test/hook"],
    ["a name that resolves to loopback (like 127.0.0.1.nip.io)", "https://loopback.example.test/hook"],
    ["a name that resolves to the metadata address", "https://metadata.example.test/hook"],
    ["a name whose AAAA is IPv4-mapped loopback", "https://mapped.example.test/hook"],
    ["a name whose AAAA is unique-local", "https://ula.example.test/hook"],
  ];
  for (const [what, url] of refused) {
    it(`refuses ${what}`, async () => {
      const verdict = await checkDestination(url, production());
      expect(verdict.ok).toBe(false);
      if (!verdict.ok) expect(verdict.reason).toMatch(/^forbidden_address_resolved: /);
    });
  }

  it("fails closed when the name does not resolve or the resolver fails", async () => {
    expect(await checkDestination("https://nowhere.example.test/hook", production())).toEqual({
      ok: false,
      reason: "dns_no_address",
    });
    const broken = await checkDestination("https://broken.example.test/hook", production());
    expect(broken.ok).toBe(false);
    if (!broken.ok) expect(broken.reason).toMatch(/^dns_resolution_failed/);
  });

  it("allows a name whose every address is public, and address literals without a lookup", async () => {
    expect(await checkDestination("https://public.example.test/hook", production())).toEqual({ ok: true });
    expect(
      await checkDestination("https://93.184.216.34/hook", {
        ...production(),
        webhookDnsResolverUrl: "http://127.0.0.1:9/never-called",
      }),
    ).toEqual({ ok: true });
  });

  it("still applies the registration rules (a URL stored before a rule tightened)", async () => {
    expect(await checkDestination("http://public.example.test/hook", production())).toEqual({
      ok: false,
      reason: "https_required",
    });
    expect(await checkDestination("https://10.0.0.1/hook", production())).toEqual({
      ok: false,
      reason: "forbidden_address",
    });
  });

  it("judges resolved addresses in every family", () => {
    expect(
      [
        "10.0.0.1",
        "127.0.0.1",
        "169.254.169.254",
        "::1",
        "::ffff:10.0.0.1",
        "fe80::1",
        "64:ff9b::7f00:1",
        "not-an-address",
      ].map(isForbiddenAddress),
    ).toEqual([true, true, true, true, true, true, true, true]);
    expect(["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"].map(isForbiddenAddress)).toEqual([false, false]);
  });
});

describe("production resolves by default", () => {
  it("uses Cloudflare's resolver unless told otherwise, and 'off' turns it off", () => {
    const base = {
      ...env,
      ENVIRONMENT: "production",
      CONSOLE_SESSION_SECRET: "x".repeat(40),
      WEBHOOK_SECRETS_KEY: "y".repeat(40),
      RECEIPT_SIGNING_KEY: PRODUCTION_LIKE_RECEIPT_KEY,
      RECEIPT_PUBLISHED_KEYS: undefined,
      CONSOLE_USERS: "",
      WEBHOOK_DNS_RESOLVER_URL: undefined,
      ACCESS_CERTS_URL: undefined,
      X402_PAY_TO: undefined,
    };
    expect(settingsOf(base).webhookDnsResolverUrl).toBe("https://cloudflare-dns.com/dns-query");
    expect(settingsOf({ ...base, WEBHOOK_DNS_RESOLVER_URL: "off" }).webhookDnsResolverUrl).toBeNull();
    expect(settingsOf({ ...env, WEBHOOK_DNS_RESOLVER_URL: undefined }).webhookDnsResolverUrl).toBeNull();
  });
});

describe("a delivery to a name that resolves to a private address", () => {
  it("is never POSTed: the attempt records why, and is retried on the schedule", async () => {
    const token = await consoleToken();
    const merchant = await createMerchant();
    const endpoint = await api("POST", "/settings/webhooks", {
      token,
      body: { url: "https://rebind.example.test/hooks/x", merchantId: merchant.merchantId, events: ["charge.created"] },
    });
    expect(endpoint.status).toBe(201);
    await createCharge(merchant.apiKey, 10);
    const deadline = Date.now() + 20_000;
    let attempts: { error: string | null; status_code: number | null }[] = [];
    while (attempts.length === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      attempts = (
        await env.DB.prepare(
          "SELECT a.error, a.status_code FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = ?",
        )
          .bind(endpoint.body.id)
          .all<{ error: string | null; status_code: number | null }>()
      ).results;
    }
    expect(attempts.length).toBeGreaterThan(0);
    for (const attempt of attempts) {
      expect(attempt.status_code).toBeNull();
      expect(attempt.error).toBe("forbidden_address_resolved: 10.1.2.3");
    }
    expect((await api("DELETE", `/settings/webhooks/${endpoint.body.id}`, { token })).status).toBe(200);
  });
});
