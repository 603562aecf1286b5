import type { SettingsVars } from "./settings";

export { type Settings, type SettingsVars, settingsOf } from "./settings";
export { DEFAULT_RETRY_SCHEDULE, MAX_QUEUE_DELAY_SECONDS } from "./webhooks";
export { MAX_GAS_KEYS, type X402Settings } from "./x402";

/** Bindings a deployment may add that wrangler.toml does not declare. */
export interface OptionalBindings {
  /** Cloudflare Email, for MAIL_TRANSPORT=send_email. */
  SEND_EMAIL?: SendEmail;
}

/**
 * The Worker's env: the bindings and vars wrangler.toml declares (`Cloudflare.Env`, generated into
 * worker-types.d.ts by `npm run types`), the optional bindings, and the vars and secrets the settings read.
 */
export type Env = Cloudflare.Env & OptionalBindings & SettingsVars;
