import { zValidator } from "@hono/zod-validator";
import type { ValidationTargets } from "hono";
import type { z } from "zod";
import { ApiError } from "./errors";

/** Issues in a stable, small shape: where and what, never the rejected value. */
export const issuesOf = (error: { issues: readonly { path: readonly PropertyKey[]; code: string; message: string }[] }) => error.issues.map((i) => ({ path: i.path.map(String).join("."), code: i.code, message: i.message }));

/**
 * `zValidator` whose failures all look the same:
 * 400 `{ error: "invalid_request", issues }` (operations section 5).
 */
export const validate = <Target extends keyof ValidationTargets, T extends z.ZodType>(target: Target, schema: T) =>
  zValidator(target, schema, (result) => {
    if (!result.success) throw new ApiError(400, "invalid_request", { issues: issuesOf(result.error) });
  });
