import { z } from "zod";
import { type Environment, wholeNumberListVar, wholeNumberVar } from "../lib/settings";

/** The longest `retry({ delaySeconds })` Cloudflare Queues allows (12 h): no retry schedule entry, jitter included, goes past it. */
export const MAX_QUEUE_DELAY_SECONDS = 43_200;

/** Seconds between delivery attempts: 10 s, 30 s, 2 min, 10 min, 1 h, 6 h, then 12 h (the queue's longest delay) to about 3 days. */
export const DEFAULT_RETRY_SCHEDULE = "10,30,120,600,3600,21600,43200,43200,43200,43200,43200";

/** How long an endpoint may fail every delivery before it is disabled (consumer.ts). */
export const FAILING_ENDPOINT_DAYS = 3;

export const webhooksShape = {
  WEBHOOK_SECRETS_KEY: z.string().min(32, "WEBHOOK_SECRETS_KEY must be at least 32 characters"),
  WEBHOOK_RETRY_SCHEDULE: wholeNumberListVar({
    max: MAX_QUEUE_DELAY_SECONDS,
    entries: { min: 1, max: 30 },
    fallback: DEFAULT_RETRY_SCHEDULE,
  }),
  WEBHOOK_TIMEOUT_MS: wholeNumberVar({ min: 1, max: 30_000, fallback: 10_000 }),
  WEBHOOK_DNS_RESOLVER_URL: z.union([z.literal("off"), z.string().url().startsWith("http")]).optional(),
  /**
   * Days a finished delivery, its attempts and its dispatched event are kept (src/webhooks/retention.ts).
   * At least FAILING_ENDPOINT_DAYS: the check that disables a failing endpoint reads that many days of
   * deliveries, and with fewer it would miss an endpoint's successes and disable a healthy one.
   */
  RETENTION_DAYS: wholeNumberVar({ min: FAILING_ENDPOINT_DAYS, max: 3650, fallback: 30 }),
};

/** Settings of this group that carry a secret, and URLs that must be https in production. */
export const webhookSecrets = ["WEBHOOK_SECRETS_KEY"] as const;
export const webhookHttpsUrls = ["WEBHOOK_DNS_RESOLVER_URL"] as const;

export interface WebhookSettings {
  webhookSecretsKey: string;
  /** Delay in seconds before retry n (0-based); its length is the number of retries. */
  webhookRetrySchedule: number[];
  webhookTimeoutMs: number;
  /** DNS-over-HTTPS resolver that webhook hosts are resolved with before each POST (src/lib/dns-guard.ts); null: not resolved. */
  webhookDnsResolverUrl: string | null;
  /** Days finished webhook history is kept (at least FAILING_ENDPOINT_DAYS). */
  retentionDays: number;
}

type Parsed = z.output<z.ZodObject<typeof webhooksShape>>;

export function webhookSettings(s: Parsed, environment: Environment): WebhookSettings {
  return {
    webhookSecretsKey: s.WEBHOOK_SECRETS_KEY,
    webhookRetrySchedule: s.WEBHOOK_RETRY_SCHEDULE,
    webhookTimeoutMs: s.WEBHOOK_TIMEOUT_MS,
    // Production resolves by default (Cloudflare's resolver); locally names are not resolved unless asked.
    webhookDnsResolverUrl:
      s.WEBHOOK_DNS_RESOLVER_URL === "off"
        ? null
        : (s.WEBHOOK_DNS_RESOLVER_URL ??
          (environment === "production" ? "https://cloudflare-dns.com/dns-query" : null)),
    retentionDays: s.RETENTION_DAYS,
  };
}
