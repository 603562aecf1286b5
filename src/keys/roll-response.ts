import type { Context } from "hono";
import type { AppEnv } from "../auth/app-env";
import { answerInBatch } from "../auth/idempotency";
import { actorOf } from "../auth/middleware";
import { ApiError } from "../lib/errors";
import { type KeyHolder, type RolledKey, rollKey } from "./roll";

/**
 * A key roll answered as both console routes answer it: 201 with the holder's id, the new key
 * (shown once, and stored encrypted in the roll's batch under an Idempotency-Key) and when the
 * old key ends; 404 for an unknown holder.
 */
export async function rollKeyResponse(c: Context<AppEnv>, holder: KeyHolder, graceSeconds: number) {
  const view = (rolled: RolledKey) => ({
    [`${holder.kind}Id`]: holder.id,
    apiKey: rolled.apiKey,
    previousKeyExpiresAt: rolled.previousKeyExpiresAt,
  });
  const rolled = await rollKey(c.env, holder, graceSeconds, actorOf(c.get("actor"), "console").email, (r) =>
    answerInBatch(c, 201, view(r)),
  );
  if (!rolled) throw new ApiError(404, `${holder.kind}_not_found`);
  return c.json(view(rolled), 201);
}
