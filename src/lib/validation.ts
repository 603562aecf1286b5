import { zValidator } from "@hono/zod-validator";
import type { MiddlewareHandler, ValidationTargets } from "hono";
import type { z } from "zod";
import { ApiError } from "./errors";

/** Issues in a stable, small shape: where and what, never the rejected value. */
export const issuesOf = (error: { issues: readonly { path: readonly PropertyKey[]; code: string; message: string }[] }) =>
  error.issues.map((i) => ({ path: i.path.map(String).join("."), code: i.code, message: i.message }));

/** JSON.parse keeps a `__proto__` key as an own property, and zod's strict objects skip it: refuse it here. */
function hasProtoKey(value: unknown, depth = 0): boolean {
  if (value === null || typeof value !== "object" || depth > 32) return false;
  if (Object.prototype.hasOwnProperty.call(value, "__proto__")) return true;
  return Object.values(value as Record<string, unknown>).some((v) => hasProtoKey(v, depth + 1));
}

/**
 * `zValidator` whose failures all look the same:
 * 400 `{ error: "invalid_request", issues }` (operations section 5).
 */
export const validate = <Target extends keyof ValidationTargets, T extends z.ZodType>(target: Target, schema: T) => {
  const inner = zValidator(target, schema, (result) => {
    if (!result.success) throw new ApiError(400, "invalid_request", { issues: issuesOf(result.error) });
  });
  if (target !== "json") return inner;
  const guarded: MiddlewareHandler = async (c, next) => {
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      raw = undefined; // malformed JSON is the inner validator's 400
    }
    if (hasProtoKey(raw)) {
      throw new ApiError(400, "invalid_request", { issues: [{ path: "__proto__", code: "unrecognized_keys", message: "unrecognized key: __proto__" }] });
    }
    return inner(c, next);
  };
  return guarded as typeof inner;
};
