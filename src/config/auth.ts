import { z } from "zod";
import type { Environment } from "../lib/settings";

const booleanString = z
  .enum(["true", "false"])
  .default("true")
  .transform((value) => value === "true");

/** Who may call the API and sign in to the console. */
export const credentialsShape = {
  SERVICE_REQUIRE_API_KEY: booleanString,
  CONSOLE_USERS: z.string().default(""),
  CONSOLE_SESSION_SECRET: z.string().min(32, "CONSOLE_SESSION_SECRET must be at least 32 characters"),
};

/** How the console's sign-in codes are sent, and Cloudflare Access sign-in. */
export const signInShape = {
  MAIL_TRANSPORT: z.enum(["log", "send_email", "http", "none"]).optional(),
  MAIL_FROM: z.string().email().optional(),
  MAIL_HTTP_URL: z.string().url().optional(),
  MAIL_HTTP_TOKEN: z.string().optional(),
  ACCESS_TEAM_DOMAIN: z.string().min(1).optional(),
  ACCESS_AUD: z.string().min(1).optional(),
  ACCESS_CERTS_URL: z.string().url().optional(),
};

/** Settings of these groups that carry a secret, and URLs (a secret, or who signs in) that must be https in production. */
export const authSecrets = ["CONSOLE_SESSION_SECRET"] as const;
export const authHttpsUrls = ["MAIL_HTTP_URL", "ACCESS_CERTS_URL"] as const;

type Parsed = z.output<z.ZodObject<typeof credentialsShape & typeof signInShape>> & { ENVIRONMENT: Environment };

/** The rules between these settings; the failures say what to fix. */
export function refineAuth(s: Parsed, ctx: z.RefinementCtx): void {
  if (s.ENVIRONMENT === "production" && !s.SERVICE_REQUIRE_API_KEY) {
    ctx.addIssue({ code: "custom", message: "SERVICE_REQUIRE_API_KEY cannot be false in production" });
  }
  if (s.ENVIRONMENT === "production" && s.MAIL_TRANSPORT === "log") {
    ctx.addIssue({ code: "custom", message: "MAIL_TRANSPORT=log would print sign-in codes to production logs" });
  }
  if (s.MAIL_TRANSPORT === "http" && !s.MAIL_HTTP_URL)
    ctx.addIssue({ code: "custom", message: "MAIL_TRANSPORT=http needs MAIL_HTTP_URL" });
  if ((s.MAIL_TRANSPORT === "http" || s.MAIL_TRANSPORT === "send_email") && !s.MAIL_FROM) {
    ctx.addIssue({ code: "custom", message: `MAIL_TRANSPORT=${s.MAIL_TRANSPORT} needs MAIL_FROM` });
  }
  if (Boolean(s.ACCESS_TEAM_DOMAIN) !== Boolean(s.ACCESS_AUD)) {
    ctx.addIssue({ code: "custom", message: "ACCESS_TEAM_DOMAIN and ACCESS_AUD are set together" });
  }
}

export interface AuthSettings {
  requireApiKey: boolean;
  consoleUsers: string[];
  consoleSessionSecret: string;
  /** How sign-in codes are sent: printed to the log (development), Cloudflare Email, an HTTP mail API, or not at all. */
  mail: {
    transport: "log" | "send_email" | "http" | "none";
    from: string | null;
    httpUrl: string | null;
    httpToken: string | null;
  };
  /** Cloudflare Access sign-in, when configured. */
  access: { teamDomain: string; audience: string; certsUrl: string } | null;
}

const bareDomain = (domain: string) => domain.replace(/^https?:\/\//, "").replace(/\/$/, "");

export function credentialSettings(
  s: Parsed,
): Pick<AuthSettings, "requireApiKey" | "consoleUsers" | "consoleSessionSecret"> {
  return {
    requireApiKey: s.SERVICE_REQUIRE_API_KEY,
    consoleUsers: s.CONSOLE_USERS.split(",")
      .map((e) => e.trim().toLowerCase())
      .filter(Boolean),
    consoleSessionSecret: s.CONSOLE_SESSION_SECRET,
  };
}

export function signInSettings(s: Parsed): Pick<AuthSettings, "mail" | "access"> {
  return {
    mail: {
      // Development prints codes to the log; production sends nothing unless a transport is configured.
      transport: s.MAIL_TRANSPORT ?? (s.ENVIRONMENT === "production" ? "none" : "log"),
      from: s.MAIL_FROM ?? null,
      httpUrl: s.MAIL_HTTP_URL ?? null,
      httpToken: s.MAIL_HTTP_TOKEN ?? null,
    },
    access:
      s.ACCESS_TEAM_DOMAIN && s.ACCESS_AUD
        ? {
            teamDomain: bareDomain(s.ACCESS_TEAM_DOMAIN),
            audience: s.ACCESS_AUD,
            certsUrl: s.ACCESS_CERTS_URL ?? `https://${bareDomain(s.ACCESS_TEAM_DOMAIN)}/cdn-cgi/access/certs`,
          }
        : null,
  };
}
