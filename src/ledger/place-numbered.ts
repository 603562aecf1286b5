import type { Env } from "../config/env";
import { type Place, placementOf } from "./place";

/**
 * The place a request names by its number (`?shard=k` on the audit and checkpoint routes), or null for
 * a shard this deployment does not run. Everything else finds places by owner or by id.
 */
export const placeNumbered = (env: Env, shard: number): Place | null => placementOf(env).each()[shard] ?? null;
