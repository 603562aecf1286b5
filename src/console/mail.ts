import type { Env, Settings } from "../config/env";

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

/**
 * Sends a console mail by the configured transport. `log` (development only;
 * refused in production) prints it to the server log, which is how a local
 * developer reads the sign-in code.
 */
export async function sendMail(env: Env, settings: Settings, mail: Mail): Promise<void> {
  const { transport, from, httpUrl, httpToken } = settings.mail;
  if (transport === "none") return;
  if (transport === "log") {
    // The mail itself is this transport's output (a developer reads the code here), not a log line: never lib/log.
    console.log(`[console mail] to=${mail.to} subject="${mail.subject}"\n${mail.text}`);
    return;
  }
  if (transport === "http") {
    const response = await fetch(httpUrl!, {
      method: "POST",
      headers: { "content-type": "application/json", ...(httpToken ? { authorization: `Bearer ${httpToken}` } : {}) },
      body: JSON.stringify({ from, to: mail.to, subject: mail.subject, text: mail.text }),
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) throw new Error(`mail API answered ${response.status}`);
    return;
  }
  if (!env.SEND_EMAIL) throw new Error("MAIL_TRANSPORT=send_email needs the SEND_EMAIL binding");
  const raw = [
    `From: ${from}`,
    `To: ${mail.to}`,
    `Subject: ${mail.subject}`,
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    "",
    mail.text,
  ].join("\r\n");
  const { EmailMessage } = await import("cloudflare:email");
  await env.SEND_EMAIL.send(new EmailMessage(from!, mail.to, raw));
}
