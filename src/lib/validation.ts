import { zValidator } from "@hono/zod-validator";
import type { Context, MiddlewareHandler, ValidationTargets } from "hono";
import { z } from "zod";
import { ApiError } from "./errors";
import { isJsonContentType, readStrictJson } from "./strict-json";

/** Issues in a stable, small shape: where and what, never the rejected value. */
export const issuesOf = (error: {
  issues: readonly { path: readonly PropertyKey[]; code: string; message: string }[];
}) => error.issues.map((i) => ({ path: i.path.map(String).join("."), code: i.code, message: i.message }));

/** JSON.parse keeps a `__proto__` key as an own property, and zod's strict objects skip it: refuse it here. */
function hasProtoKey(value: unknown, depth = 0): boolean {
  if (value === null || typeof value !== "object" || depth > 32) return false;
  if (Object.hasOwn(value, "__proto__")) return true;
  return Object.values(value as Record<string, unknown>).some((v) => hasProtoKey(v, depth + 1));
}

const hasNoBody = (c: Context) => c.req.raw.body === null || c.req.header("Content-Length") === "0";

const jsonBodyRequired = () =>
  new ApiError(400, "invalid_request", {
    issues: [
      { path: "", code: "json_body_required", message: "a JSON body is required (Content-Type: application/json)" },
    ],
  });

export interface JsonValidationOptions {
  /**
   * The whole body may be left out: a request with no body and no Content-Type
   * reads as `{}`. Only for schemas whose every field has a default that is a
   * safe answer (rotate-secret's grace), never where `{}` means "clear it all".
   */
  optionalBody?: boolean;
}

/**
 * `zValidator` whose failures all look the same:
 * 400 `{ error: "invalid_request", issues }` (docs/api.md, Errors and status codes).
 *
 * For "json", a body that is not declared JSON is refused rather than read:
 * hono hands the schema `{}` for any other Content-Type (or none), which an
 * all-optional schema such as the spending policy would take as "no limits".
 * A JSON body is read strictly (./strict-json.ts): another charset or a
 * byte-order mark is 415 `unsupported_media_type`; bytes that are not UTF-8,
 * a key twice in one object or a lone surrogate are the 400.
 */
export const validate = <Target extends keyof ValidationTargets, T extends z.ZodType>(
  target: Target,
  schema: T,
  options: JsonValidationOptions = {},
) => {
  const inner = zValidator(target, schema, (result) => {
    if (!result.success) throw new ApiError(400, "invalid_request", { issues: issuesOf(result.error) });
  });
  if (target !== "json") return inner;
  const guarded: MiddlewareHandler = async (c, next) => {
    const contentType = c.req.header("Content-Type");
    if (!isJsonContentType(contentType)) {
      // No body and no Content-Type at all is the one non-JSON request an optional body lets through (as `{}`).
      if (options.optionalBody && contentType === undefined && hasNoBody(c)) return inner(c, next);
      throw jsonBodyRequired();
    }
    // The bytes as sent. hono caches them, so the inner validator's c.req.json() parses these same bytes, which
    // once accepted here decode to the same text. Nothing before this may read the body as text (auth/idempotency.ts
    // reads bytes): hono would then rebuild the bytes from that text, with the BOM dropped and bad UTF-8 as U+FFFD.
    const read = readStrictJson(new Uint8Array(await c.req.arrayBuffer()), contentType);
    if (!read.ok && read.reason === "unsupported_encoding") throw new ApiError(415, "unsupported_media_type");
    if (!read.ok && read.reason === "refused") throw new ApiError(400, "invalid_request", { issues: [read.issue] });
    // Malformed JSON is the inner validator's 400.
    if (read.ok && hasProtoKey(read.value)) {
      throw new ApiError(400, "invalid_request", {
        issues: [{ path: "__proto__", code: "unrecognized_keys", message: "unrecognized key: __proto__" }],
      });
    }
    return inner(c, next);
  };
  return guarded as typeof inner;
};

/**
 * An object's id or token in a path. Any string that names no object is that
 * route's 404, whatever its length ("404 if unknown"); the cap is far above
 * every id this service makes, so only an absurd segment is a 400.
 */
export const pathId = z.string().min(1).max(512);
