import type { Env, Settings } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import type { Actor } from "./credentials";

/** Hono's environment: bindings plus per-request variables set by middleware. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    requestId: string;
    settings: Settings;
    actor?: Actor;
    /** The console page session's CSRF token (console pages only). */
    csrf?: string;
    /** The reserved Idempotency-Key of this request, if it has one (auth/idempotency.ts). */
    idempotency?: IdempotencySlot;
  };
}
