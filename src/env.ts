import { z } from "zod";
import type { LedgerDurableObject } from "./ledger/ledger.do";
import type { WalletDurableObject } from "./agents/wallet.do";
import type { GrantDurableObject } from "./paylinks/grant.do";

/** Bindings and vars as wrangler.toml declares them. */
export interface Env {
  DB: D1Database;
  WALLET: DurableObjectNamespace<WalletDurableObject>;
  LEDGER: DurableObjectNamespace<LedgerDurableObject>;
  GRANT: DurableObjectNamespace<GrantDurableObject>;
  WEBHOOK_QUEUE: Queue<unknown>;
  ENVIRONMENT?: string;
  SERVICE_REQUIRE_API_KEY?: string;
  CONSOLE_USERS?: string;
  CONSOLE_SESSION_SECRET?: string;
  APPROVAL_TTL_HOURS?: string;
}

const booleanString = z
  .enum(["true", "false"])
  .default("true")
  .transform((value) => value === "true");

const SettingsSchema = z
  .object({
    ENVIRONMENT: z.enum(["development", "test", "production"]).default("production"),
    SERVICE_REQUIRE_API_KEY: booleanString,
    CONSOLE_USERS: z.string().default(""),
    CONSOLE_SESSION_SECRET: z.string().min(32, "CONSOLE_SESSION_SECRET must be at least 32 characters"),
    APPROVAL_TTL_HOURS: z.coerce.number().int().positive().max(24 * 30).default(24),
  })
  .superRefine((settings, ctx) => {
    if (settings.ENVIRONMENT === "production" && !settings.SERVICE_REQUIRE_API_KEY) {
      ctx.addIssue({ code: "custom", message: "SERVICE_REQUIRE_API_KEY cannot be false in production" });
    }
    if (settings.ENVIRONMENT === "production" && /^(dev|test)-only/.test(settings.CONSOLE_SESSION_SECRET)) {
      ctx.addIssue({ code: "custom", message: "CONSOLE_SESSION_SECRET holds a development value" });
    }
  });

export interface Settings {
  environment: "development" | "test" | "production";
  requireApiKey: boolean;
  consoleUsers: string[];
  consoleSessionSecret: string;
  approvalTtlMs: number;
}

const cache = new WeakMap<object, Settings>();

/**
 * Parses the settings once per env object and fails closed: a missing or
 * insecure secret throws instead of running with a default.
 */
export function settingsOf(env: Env): Settings {
  const cached = cache.get(env);
  if (cached) return cached;
  const parsed = SettingsSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`Invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ")}`);
  }
  const s = parsed.data;
  const settings: Settings = {
    environment: s.ENVIRONMENT,
    requireApiKey: s.SERVICE_REQUIRE_API_KEY,
    consoleUsers: s.CONSOLE_USERS.split(",").map((e) => e.trim().toLowerCase()).filter(Boolean),
    consoleSessionSecret: s.CONSOLE_SESSION_SECRET,
    approvalTtlMs: s.APPROVAL_TTL_HOURS * 3600_000,
  };
  cache.set(env, settings);
  return settings;
}
