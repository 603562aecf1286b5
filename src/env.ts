import { z } from "zod";
import type { LedgerDurableObject } from "./ledger/ledger.do";
import type { WalletDurableObject } from "./agents/wallet.do";
import type { GrantDurableObject } from "./paylinks/grant.do";
import type { X402SettlerDurableObject } from "./x402/settler.do";
import type { BenchFloorDurableObject } from "./bench/floor.do";

/** The longest `retry({ delaySeconds })` Cloudflare Queues allows (12 h): no retry schedule entry, jitter included, goes past it. */
export const MAX_QUEUE_DELAY_SECONDS = 43_200;

/** Bindings and vars as wrangler.toml declares them. */
export interface Env {
  DB: D1Database;
  WALLET: DurableObjectNamespace<WalletDurableObject>;
  LEDGER: DurableObjectNamespace<LedgerDurableObject>;
  GRANT: DurableObjectNamespace<GrantDurableObject>;
  X402_SETTLER: DurableObjectNamespace<X402SettlerDurableObject>;
  /** `npm run bench` only: bound in the development configuration, never in production. */
  BENCH_FLOOR?: DurableObjectNamespace<BenchFloorDurableObject>;
  WEBHOOK_QUEUE: Queue<unknown>;
  WEBHOOK_DLQ: Queue<unknown>;
  CREDENTIAL_RATE_LIMIT?: RateLimit;
  CLIENT_RATE_LIMIT?: RateLimit;
  ENVIRONMENT?: string;
  SERVICE_REQUIRE_API_KEY?: string;
  CONSOLE_USERS?: string;
  CONSOLE_SESSION_SECRET?: string;
  APPROVAL_TTL_HOURS?: string;
  WEBHOOK_SECRETS_KEY?: string;
  WEBHOOK_RETRY_SCHEDULE?: string;
  WEBHOOK_TIMEOUT_MS?: string;
  WEBHOOK_DNS_RESOLVER_URL?: string;
  X402_NETWORK?: string;
  X402_CHAIN_ID?: string;
  X402_ASSET?: string;
  X402_ASSET_NAME?: string;
  X402_ASSET_VERSION?: string;
  X402_PAY_TO?: string;
  X402_MAX_TIMEOUT_SECONDS?: string;
  X402_FACILITATOR_URL?: string;
  X402_FACILITATOR_HEADERS?: string;
  X402_FACILITATOR_TIMEOUT_MS?: string;
  RPC_URL?: string;
  FACILITATOR_PRIVATE_KEY?: string;
  DEPOSIT_MNEMONIC?: string;
  DEPOSIT_CONFIRMATIONS?: string;
  MAIL_TRANSPORT?: string;
  MAIL_FROM?: string;
  MAIL_HTTP_URL?: string;
  MAIL_HTTP_TOKEN?: string;
  SEND_EMAIL?: SendEmail;
  ACCESS_TEAM_DOMAIN?: string;
  ACCESS_AUD?: string;
  ACCESS_CERTS_URL?: string;
  BENCH_ROUTES?: string;
}

/** Seconds between delivery attempts: 10 s, 30 s, 2 min, 10 min, 1 h, 6 h, then 12 h (the queue's longest delay) to about 3 days. */
export const DEFAULT_RETRY_SCHEDULE = "10,30,120,600,3600,21600,43200,43200,43200,43200,43200";

const booleanString = z
  .enum(["true", "false"])
  .default("true")
  .transform((value) => value === "true");

const address = z.string().regex(/^0x[a-fA-F0-9]{40}$/, "must be an EVM address");

/** Gas keys the built-in facilitator takes at most (one settler object each). */
export const MAX_GAS_KEYS = 32;

/**
 * x402 and deposits are configured as a group: with X402_PAY_TO unset the
 * deployment takes no on-chain payments (x402 routes answer 503); once set,
 * everything the chosen facilitator needs must be present.
 */
const X402Schema = z
  .object({
    X402_NETWORK: z.string().min(1).default("base"),
    X402_CHAIN_ID: z.coerce.number().int().positive().default(8453),
    X402_ASSET: address,
    X402_ASSET_NAME: z.string().min(1).default("USD Coin"),
    X402_ASSET_VERSION: z.string().min(1).default("2"),
    X402_PAY_TO: address,
    X402_MAX_TIMEOUT_SECONDS: z.coerce.number().int().min(30).max(3600).default(300),
    X402_FACILITATOR_URL: z.string().url().optional(),
    X402_FACILITATOR_HEADERS: z.string().optional(),
    X402_FACILITATOR_TIMEOUT_MS: z.coerce.number().int().positive().max(120_000).default(30_000),
    RPC_URL: z.string().url(),
    // One gas key, or several separated by commas: each is a settlement lane of its own (docs/scaling.md).
    FACILITATOR_PRIVATE_KEY: z
      .string()
      .transform((keys) => keys.split(",").map((k) => k.trim()))
      .pipe(
        z
          .array(z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be 32-byte hex private keys, separated by commas"))
          .min(1)
          .max(MAX_GAS_KEYS)
          .refine(
            (keys) => new Set(keys.map((k) => k.toLowerCase())).size === keys.length,
            "must not name a key twice",
          ),
      )
      .optional(),
    // The receiving key: agents' deposit addresses, and the receiving address of each charge and checkout
    // link that binds an x402 authorization to what it pays. Without it a v1 payment would pay any charge.
    DEPOSIT_MNEMONIC: z
      .string({ error: "is required with x402: it derives the deposit and receiving addresses" })
      .trim()
      .refine((m) => m.split(/\s+/).length >= 12, "must be a BIP-39 mnemonic of 12 or more words"),
    DEPOSIT_CONFIRMATIONS: z.coerce.number().int().min(0).max(1000).default(3),
  })
  .superRefine((x, ctx) => {
    if (!x.X402_FACILITATOR_URL && !x.FACILITATOR_PRIVATE_KEY) {
      ctx.addIssue({
        code: "custom",
        message: "the built-in facilitator needs FACILITATOR_PRIVATE_KEY (or set X402_FACILITATOR_URL)",
      });
    }
  });

export interface X402Settings {
  network: string;
  chainId: number;
  asset: `0x${string}`;
  assetName: string;
  assetVersion: string;
  payTo: `0x${string}`;
  maxTimeoutSeconds: number;
  facilitatorUrl: string | null;
  facilitatorHeaders: Record<string, string>;
  facilitatorTimeoutMs: number;
  rpcUrl: string;
  /** The built-in facilitator's gas keys, one settlement lane each (unused when X402_FACILITATOR_URL names a remote one). */
  facilitatorPrivateKeys: `0x${string}`[];
  /** The receiving key (BIP-39): deposit addresses on account 0, charges' and links' receiving addresses on account 1. */
  receivingMnemonic: string;
  depositConfirmations: number;
}

const isHttps = (url: string) => url.startsWith("https://");

function parseX402(env: Env): X402Settings | null {
  if (!env.X402_PAY_TO) return null;
  const parsed = X402Schema.safeParse(env);
  if (!parsed.success) {
    throw new Error(
      `Invalid x402 configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ")}`,
    );
  }
  const x = parsed.data;
  if ((env.ENVIRONMENT ?? "production") === "production") {
    for (const name of ["X402_FACILITATOR_URL", "RPC_URL"] as const) {
      if (x[name] && !isHttps(x[name]))
        throw new Error(`Invalid x402 configuration: ${name} must be https in production`);
    }
  }
  let headers: Record<string, string> = {};
  if (x.X402_FACILITATOR_HEADERS) {
    // Never JSON.parse's own message: it quotes the text, which holds the facilitator's credentials.
    let json: unknown;
    try {
      json = JSON.parse(x.X402_FACILITATOR_HEADERS);
    } catch {
      json = undefined;
    }
    const h = z.record(z.string(), z.string()).safeParse(json);
    if (!h.success)
      throw new Error("Invalid x402 configuration: X402_FACILITATOR_HEADERS must be a JSON object of strings");
    headers = h.data;
  }
  return {
    network: x.X402_NETWORK,
    chainId: x.X402_CHAIN_ID,
    asset: x.X402_ASSET as `0x${string}`,
    assetName: x.X402_ASSET_NAME,
    assetVersion: x.X402_ASSET_VERSION,
    payTo: x.X402_PAY_TO as `0x${string}`,
    maxTimeoutSeconds: x.X402_MAX_TIMEOUT_SECONDS,
    facilitatorUrl: x.X402_FACILITATOR_URL ?? null,
    facilitatorHeaders: headers,
    facilitatorTimeoutMs: x.X402_FACILITATOR_TIMEOUT_MS,
    rpcUrl: x.RPC_URL,
    facilitatorPrivateKeys: (x.FACILITATOR_PRIVATE_KEY ?? []) as `0x${string}`[],
    receivingMnemonic: x.DEPOSIT_MNEMONIC,
    depositConfirmations: x.DEPOSIT_CONFIRMATIONS,
  };
}

const SettingsSchema = z
  .object({
    ENVIRONMENT: z.enum(["development", "test", "production"]).default("production"),
    SERVICE_REQUIRE_API_KEY: booleanString,
    CONSOLE_USERS: z.string().default(""),
    CONSOLE_SESSION_SECRET: z.string().min(32, "CONSOLE_SESSION_SECRET must be at least 32 characters"),
    APPROVAL_TTL_HOURS: z.coerce
      .number()
      .int()
      .positive()
      .max(24 * 30)
      .default(24),
    WEBHOOK_SECRETS_KEY: z.string().min(32, "WEBHOOK_SECRETS_KEY must be at least 32 characters"),
    WEBHOOK_RETRY_SCHEDULE: z
      .string()
      .default(DEFAULT_RETRY_SCHEDULE)
      .transform((text) => text.split(",").map((n) => Number(n.trim())))
      .pipe(z.array(z.number().int().min(0).max(MAX_QUEUE_DELAY_SECONDS)).min(1).max(30)),
    WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().max(30_000).default(10_000),
    WEBHOOK_DNS_RESOLVER_URL: z.union([z.literal("off"), z.string().url().startsWith("http")]).optional(),
    MAIL_TRANSPORT: z.enum(["log", "send_email", "http", "none"]).optional(),
    MAIL_FROM: z.string().email().optional(),
    MAIL_HTTP_URL: z.string().url().optional(),
    MAIL_HTTP_TOKEN: z.string().optional(),
    ACCESS_TEAM_DOMAIN: z.string().min(1).optional(),
    ACCESS_AUD: z.string().min(1).optional(),
    ACCESS_CERTS_URL: z.string().url().optional(),
    BENCH_ROUTES: z.enum(["true", "false"]).default("false"),
  })
  .superRefine((settings, ctx) => {
    if (settings.ENVIRONMENT === "production" && !settings.SERVICE_REQUIRE_API_KEY) {
      ctx.addIssue({ code: "custom", message: "SERVICE_REQUIRE_API_KEY cannot be false in production" });
    }
    if (settings.ENVIRONMENT === "production" && settings.MAIL_TRANSPORT === "log") {
      ctx.addIssue({ code: "custom", message: "MAIL_TRANSPORT=log would print sign-in codes to production logs" });
    }
    if (settings.MAIL_TRANSPORT === "http" && !settings.MAIL_HTTP_URL)
      ctx.addIssue({ code: "custom", message: "MAIL_TRANSPORT=http needs MAIL_HTTP_URL" });
    if ((settings.MAIL_TRANSPORT === "http" || settings.MAIL_TRANSPORT === "send_email") && !settings.MAIL_FROM) {
      ctx.addIssue({ code: "custom", message: `MAIL_TRANSPORT=${settings.MAIL_TRANSPORT} needs MAIL_FROM` });
    }
    if (Boolean(settings.ACCESS_TEAM_DOMAIN) !== Boolean(settings.ACCESS_AUD)) {
      ctx.addIssue({ code: "custom", message: "ACCESS_TEAM_DOMAIN and ACCESS_AUD are set together" });
    }
    if (settings.ENVIRONMENT === "production" && settings.BENCH_ROUTES === "true") {
      ctx.addIssue({ code: "custom", message: "BENCH_ROUTES cannot be true in production" });
    }
    // URLs that carry a secret or decide who signs in: never cleartext in production.
    for (const name of ["MAIL_HTTP_URL", "ACCESS_CERTS_URL", "WEBHOOK_DNS_RESOLVER_URL"] as const) {
      const url = settings[name];
      if (settings.ENVIRONMENT === "production" && url && url !== "off" && !isHttps(url)) {
        ctx.addIssue({ code: "custom", message: `${name} must be https in production` });
      }
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
  /** DNS-over-HTTPS resolver that webhook hosts are resolved with before each POST (src/webhooks/dns-guard.ts); null: not resolved. */
  webhookDnsResolverUrl: string | null;
  /** Null when this deployment takes no on-chain payments. */
  x402: X402Settings | null;
  /** How sign-in codes are sent: printed to the log (development), Cloudflare Email, an HTTP mail API, or not at all. */
  mail: {
    transport: "log" | "send_email" | "http" | "none";
    from: string | null;
    httpUrl: string | null;
    httpToken: string | null;
  };
  /** Cloudflare Access sign-in, when configured. */
  access: { teamDomain: string; audience: string; certsUrl: string } | null;
  /** The runtime-floor routes of `npm run bench` (src/bench); never in production. */
  benchRoutes: boolean;
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
    throw new Error(
      `Invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`).join("; ")}`,
    );
  }
  const s = parsed.data;
  const settings: Settings = {
    environment: s.ENVIRONMENT,
    requireApiKey: s.SERVICE_REQUIRE_API_KEY,
    consoleUsers: s.CONSOLE_USERS.split(",")
      .map((e) => e.trim().toLowerCase())
      .filter(Boolean),
    consoleSessionSecret: s.CONSOLE_SESSION_SECRET,
    approvalTtlMs: s.APPROVAL_TTL_HOURS * 3600_000,
    webhookSecretsKey: s.WEBHOOK_SECRETS_KEY,
    webhookRetrySchedule: s.WEBHOOK_RETRY_SCHEDULE,
    webhookTimeoutMs: s.WEBHOOK_TIMEOUT_MS,
    // Production resolves by default (Cloudflare's resolver); locally names are not resolved unless asked.
    webhookDnsResolverUrl:
      s.WEBHOOK_DNS_RESOLVER_URL === "off"
        ? null
        : (s.WEBHOOK_DNS_RESOLVER_URL ??
          (s.ENVIRONMENT === "production" ? "https://cloudflare-dns.com/dns-query" : null)),
    x402: parseX402(env),
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
            teamDomain: s.ACCESS_TEAM_DOMAIN.replace(/^https?:\/\//, "").replace(/\/$/, ""),
            audience: s.ACCESS_AUD,
            certsUrl:
              s.ACCESS_CERTS_URL ??
              `https://${s.ACCESS_TEAM_DOMAIN.replace(/^https?:\/\//, "").replace(/\/$/, "")}/cdn-cgi/access/certs`,
          }
        : null,
    // Production never reaches here with it on: the refinement above throws.
    benchRoutes: s.BENCH_ROUTES === "true" && s.ENVIRONMENT !== "production",
  };
  cache.set(env, settings);
  return settings;
}
