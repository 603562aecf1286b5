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
  WEBHOOK_DLQ: Queue<unknown>;
  ENVIRONMENT?: string;
  SERVICE_REQUIRE_API_KEY?: string;
  CONSOLE_USERS?: string;
  CONSOLE_SESSION_SECRET?: string;
  APPROVAL_TTL_HOURS?: string;
  WEBHOOK_SECRETS_KEY?: string;
  WEBHOOK_RETRY_SCHEDULE?: string;
  WEBHOOK_TIMEOUT_MS?: string;
}

/** Seconds between delivery attempts: 10 s, 30 s, 2 min, 10 min, 1 h, 6 h, then 12 h (the queue's longest delay) to about 3 days. */
export const DEFAULT_RETRY_SCHEDULE = "10,30,120,600,3600,21600,43200,43200,43200,43200,43200";

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
    WEBHOOK_SECRETS_KEY: z.string().min(32, "WEBHOOK_SECRETS_KEY must be at least 32 characters"),
    WEBHOOK_RETRY_SCHEDULE: z
      .string()
      .default(DEFAULT_RETRY_SCHEDULE)
      .transform((text) => text.split(",").map((n) => Number(n.trim())))
      .pipe(z.array(z.number().int().min(0).max(43_200)).min(1).max(30)),
    WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().max(30_000).default(10_000),
  })
  .superRefine((settings, ctx) => {
    if (settings.ENVIRONMENT === "production" && !settings.SERVICE_REQUIRE_API_KEY) {
      ctx.addIssue({ code: "custom", message: "SERVICE_REQUIRE_API_KEY cannot be false in production" });
    }
    for (const name of ["CONSOLE_SESSION_SECRET", "WEBHOOK_SECRETS_KEY"] as const) {
      if (settings.ENVIRONMENT === "production" && /^(dev|test)-only/.test(settings[name])) {
        ctx.addIssue({ code: "custom", message: `${name} holds a development value` });
      }
    }
  });

export interface Settings {
  environment: "development" | "test" | "production";
  requireApiKey: boolean;
  consoleUsers: string[];
  consoleSessionSecret: string;
  approvalTtlMs: number;
  webhookSecretsKey: string;
  /** Delay in seconds before retry n (0-based); its length is the number of retries. */
  webhookRetrySchedule: number[];
  webhookTimeoutMs: number;
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
    webhookSecretsKey: s.WEBHOOK_SECRETS_KEY,
    webhookRetrySchedule: s.WEBHOOK_RETRY_SCHEDULE,
    webhookTimeoutMs: s.WEBHOOK_TIMEOUT_MS,
  };
  cache.set(env, settings);
  return settings;
}
