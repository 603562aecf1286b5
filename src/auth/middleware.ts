import { createMiddleware } from "hono/factory";
import { placementOf } from "../ledger/place";
import type { CodeWith } from "../lib/error-codes";
import { ApiError } from "../lib/errors";
import { enforceRateLimit } from "../lib/rate-limit";
import type { MoneyAct } from "./answers";
import type { AppEnv } from "./app-env";
import { type Actor, type ActorKind, resolveCredential } from "./credentials";
import { idempotent } from "./idempotency";

/** The 401 message names the credential the route expects. */
export const CREDENTIAL_REQUIRED: Record<ActorKind, CodeWith<401>> = {
  merchant: "merchant_api_key_required",
  agent: "agent_api_key_required",
  console: "console_session_required",
};

const DEV_CONSOLE_USER = "dev@localhost";

function bearerToken(header: string | undefined): string | null | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

/**
 * Admits only the `expected` actor kind. Missing or invalid credential: 401
 * naming the expected kind. A valid credential of another kind: 403. Over the
 * credential's rate limit: 429. Only an admitted request reaches its
 * `Idempotency-Key` (`idempotent`), so a stored answer is replayed only to a
 * credential that is valid now, and a refusal is never stored under the key.
 */
export const requireActor = <K extends ActorKind>(
  expected: K,
  options: {
    idempotencyKey?: boolean;
    /**
     * What the request does with money (auth/answers.ts): its key and answer are kept with that
     * money, where the ledger's rule places it. Undeclared: it moves none, and keeps them in control.
     */
    money?: MoneyAct;
  } = {},
) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const token = bearerToken(c.req.header("authorization"));
    if (token === undefined) {
      const settings = c.get("settings");
      // Local development may run without keys, but only where an identity is not needed to move money.
      if (!settings.requireApiKey && settings.environment === "development" && expected === "console") {
        c.set("actor", { kind: "console", email: DEV_CONSOLE_USER });
        return next();
      }
      throw new ApiError(401, CREDENTIAL_REQUIRED[expected as ActorKind]);
    }
    if (token === null) throw new ApiError(401, CREDENTIAL_REQUIRED[expected as ActorKind]);
    const actor = await resolveCredential(placementOf(c.env).control.db, c.get("settings"), token);
    if (!actor) throw new ApiError(401, CREDENTIAL_REQUIRED[expected as ActorKind]);
    if (actor.kind !== expected)
      throw new ApiError(403, "credential_not_allowed", {
        expected: CREDENTIAL_REQUIRED[expected].replace(/_required$/, ""),
      });
    await enforceRateLimit(
      c.env.CREDENTIAL_RATE_LIMIT,
      actor.kind === "merchant"
        ? `merchant:${actor.merchantId}`
        : actor.kind === "agent"
          ? `agent:${actor.agentId}`
          : `console:${actor.email}`,
    );
    c.set("actor", actor);
    if (options.idempotencyKey === false) return next();
    return idempotent(c, next, options.money);
  });

/** The authenticated actor of the kind the route required. */
export function actorOf<K extends ActorKind>(actor: Actor | undefined, kind: K): Extract<Actor, { kind: K }> {
  if (!actor || actor.kind !== kind) throw new Error(`route is missing requireActor("${kind}")`);
  return actor as Extract<Actor, { kind: K }>;
}
