import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { settingsOf } from "../../src/config/env";
import { sendMail } from "../../src/console/mail";
import { receiverUrl, waitForReceived } from "../helpers/webhooks";

describe("console mail transports", () => {
  const base = settingsOf(env);
  const mail = { to: "ops@example.com", subject: "Your console sign-in code", text: "Your sign-in code is 123456." };

  it("http: POSTs the mail as JSON to the configured API with its token", async () => {
    const settings = {
      ...base,
      mail: {
        transport: "http" as const,
        from: "console@example.com",
        httpUrl: `${receiverUrl()}/hooks/ok-mail-api`,
        httpToken: "mail-token",
      },
    };
    await sendMail(env, settings, mail);
    const [request] = await waitForReceived("ok-mail-api", (list) => list.length >= 1);
    expect(JSON.parse(request!.body)).toEqual({ from: "console@example.com", ...mail });
    expect(request!.headers.authorization).toBe("Bearer mail-token");
  });

  it("http: a failing mail API is an error, not a silent success", async () => {
    const settings = {
      ...base,
      mail: {
        transport: "http" as const,
        from: "console@example.com",
        httpUrl: `${receiverUrl()}/hooks/fail-mail-api`,
        httpToken: null,
      },
    };
    await expect(sendMail(env, settings, mail)).rejects.toThrow(/500/);
  });

  it("log: prints the mail (development); none: sends nothing", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      await sendMail(env, { ...base, mail: { ...base.mail, transport: "log" } }, mail);
      expect(log.mock.calls.flat().join("\n")).toContain("123456");
      log.mockClear();
      await sendMail(env, { ...base, mail: { ...base.mail, transport: "none" } }, mail);
      expect(log).not.toHaveBeenCalled();
    } finally {
      log.mockRestore();
    }
  });

  it("send_email without its binding refuses loudly", async () => {
    await expect(
      sendMail(
        env,
        { ...base, mail: { transport: "send_email", from: "console@example.com", httpUrl: null, httpToken: null } },
        mail,
      ),
    ).rejects.toThrow(/SEND_EMAIL/);
  });
});
