import { afterEach, describe, expect, it, vi } from "vitest";
import { errorText, log } from "../../src/lib/log";

afterEach(() => {
  vi.restoreAllMocks();
});

const linesOf = (spy: { mock: { calls: unknown[][] } }) =>
  spy.mock.calls.map((call) => JSON.parse(String(call[0])) as Record<string, unknown>);

describe("log", () => {
  it("writes one JSON line { level, where, ...fields } to the console method of its level", () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    log.error("cron", { job: "sweep", error: new Error("boom") });
    log.warn("x402_watch", { paymentId: "xpay_1", skipped: undefined });
    expect(linesOf(error)).toEqual([{ level: "error", where: "cron", job: "sweep", error: "Error: boom" }]);
    expect(linesOf(warn)).toEqual([{ level: "warn", where: "x402_watch", paymentId: "xpay_1" }]);
  });

  it("never writes a field named like a secret, nor a key, secret or token inside a message", () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const key = `sk_mch_${"a".repeat(43)}`;
    const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMifQ.c2lnbmF0dXJl";
    log.error("leak", {
      apiKey: key,
      webhookSecret: "whsec_x",
      authorization: "Bearer x",
      error: new Error(`refused ${key} whsec_abc-123 svc_sk_def and Bearer ${jwt} ${jwt}`),
    });
    const line = String(error.mock.calls[0]![0]);
    for (const leaked of [key, "whsec_abc", "svc_sk_def", jwt, "apiKey", "webhookSecret", "authorization"])
      expect(line).not.toContain(leaked);
    expect(JSON.parse(line)).toEqual({
      level: "error",
      where: "leak",
      error: "Error: refused [redacted] [redacted] [redacted] and [redacted] [redacted]",
    });
  });
});

describe("errorText", () => {
  it("is the first line of `Name: message`, at most 300 characters, viem's short message first", () => {
    expect(errorText(new TypeError("bad\nstack-like details"))).toBe("TypeError: bad");
    expect(errorText("plain")).toBe("plain");
    expect(errorText(new Error("x".repeat(1000)))).toHaveLength(300);
    const viem = Object.assign(new Error("HTTP request failed.\n\nURL: http://rpc.example/key"), {
      name: "HttpRequestError",
      shortMessage: "HTTP request failed.",
    });
    expect(errorText(viem)).toBe("HttpRequestError: HTTP request failed.");
  });
});
