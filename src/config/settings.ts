import { z } from "zod";
import { type Environment, isHttps, issuesOf, type VarsOf } from "../lib/settings";
import { approvalSettings, approvalsShape } from "./approvals";
import { archiveSettings, archiveShape } from "./archive";
import { auditAnchorSettings, auditAnchorShape } from "./audit";
import {
  type AuthSettings,
  authHttpsUrls,
  authSecrets,
  credentialSettings,
  credentialsShape,
  refineAuth,
  signInSettings,
  signInShape,
} from "./auth";
import { type LedgerSettings, ledgerSettings, ledgerShape, refineLedger } from "./ledger";
import { NON_PRODUCTION_KID, type ProofSettings, proofSettings, proofsShape } from "./proofs";
import { type WebhookSettings, webhookHttpsUrls, webhookSecrets, webhookSettings, webhooksShape } from "./webhooks";
import { type X402Settings, type X402Vars, x402Settings } from "./x402";

// The service's settings, parsed from its vars and secrets. Each group sits beside its domain
// (auth, approvals, webhooks, x402); this module puts them together and adds the rules across groups.

const environmentShape = {
  ENVIRONMENT: z.enum(["development", "test", "production"]).default("production"),
};

const SettingsSchema = z
  .object({
    ...environmentShape,
    ...credentialsShape,
    ...approvalsShape,
    ...webhooksShape,
    ...signInShape,
    ...proofsShape,
    ...auditAnchorShape,
    ...archiveShape,
    ...ledgerShape,
  })
  .superRefine((settings, ctx) => {
    refineAuth(settings, ctx);
    refineLedger(settings, ctx);
    // URLs that carry a secret or decide who signs in: never cleartext in production.
    for (const name of [...authHttpsUrls, ...webhookHttpsUrls]) {
      const url = settings[name];
      if (settings.ENVIRONMENT === "production" && url && url !== "off" && !isHttps(url)) {
        ctx.addIssue({ code: "custom", message: `${name} must be https in production` });
      }
    }
    for (const name of [...authSecrets, ...webhookSecrets]) {
      if (settings.ENVIRONMENT === "production" && /^(dev|test)-only/.test(settings[name])) {
        ctx.addIssue({ code: "custom", message: `${name} holds a development value` });
      }
    }
    // Development and test keys' private halves are in the repository: whatever they sign proves nothing.
    if (settings.ENVIRONMENT === "production") {
      if (NON_PRODUCTION_KID.test(settings.RECEIPT_SIGNING_KEY.kid ?? ""))
        ctx.addIssue({ code: "custom", message: "RECEIPT_SIGNING_KEY is a development key" });
      if ((settings.RECEIPT_PUBLISHED_KEYS ?? []).some((k) => NON_PRODUCTION_KID.test(k.kid ?? "")))
        ctx.addIssue({ code: "custom", message: "RECEIPT_PUBLISHED_KEYS publishes a development key" });
    }
  });

/** Every var and secret the settings read; all optional to the type, the schemas decide what is required. */
export type SettingsVars = VarsOf<typeof SettingsSchema.shape> & X402Vars;

export type Settings = { environment: Environment } & AuthSettings & { approvalTtlMs: number } & WebhookSettings & {
    /** Null when this deployment takes no on-chain payments. */
    x402: X402Settings | null;
    /** The keys that sign receipts and audit checkpoints. */
    proofs: ProofSettings;
    /** The contract audit checkpoints are anchored on (on the x402 chain), or null: signed, not anchored. */
    auditAnchor: `0x${string}` | null;
    /** Audit rows and ledger entries older than this (and checkpointed) are archived to R2. */
    archiveAfterMs: number;
  } & LedgerSettings;

const cache = new WeakMap<object, Settings>();

/**
 * Parses the settings once per env object and fails closed: a missing or
 * insecure secret throws instead of running with a default.
 */
export function settingsOf(env: SettingsVars): Settings {
  const cached = cache.get(env);
  if (cached) return cached;
  const parsed = SettingsSchema.safeParse(env);
  if (!parsed.success) throw new Error(`Invalid configuration: ${issuesOf(parsed.error)}`);
  const s = parsed.data;
  const settings: Settings = {
    environment: s.ENVIRONMENT,
    ...credentialSettings(s),
    ...approvalSettings(s),
    ...webhookSettings(s, s.ENVIRONMENT),
    x402: x402Settings(env),
    ...signInSettings(s),
    ...proofSettings(s),
    ...auditAnchorSettings(s),
    ...archiveSettings(s),
    ...ledgerSettings(s),
  };
  cache.set(env, settings);
  return settings;
}
