import type { ContentfulStatusCode } from "hono/utils/http-status";
import { type CodeWith, codeWith, type ErrorCode, type ErrorStatus, type StatusOf } from "./error-codes";

/**
 * The one error type thrown at the HTTP edge. `app.onError` renders it as
 * `{ error, ...extra }` with its status; services return tagged results instead.
 * The code must be one of `ERROR_CODES`, answered with a status the map gives it.
 */
export class ApiError<C extends ErrorCode = ErrorCode> extends Error {
  readonly status: ContentfulStatusCode;

  constructor(
    status: NoInfer<StatusOf<C>>,
    readonly error: C,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(error);
    this.status = status;
    this.name = "ApiError";
  }
}

export const notFound = (error: CodeWith<404> = "not_found") => new ApiError(404, error);

const ERROR_STATUSES: ReadonlySet<number> = new Set<ErrorStatus>([
  400, 401, 402, 403, 404, 405, 409, 413, 415, 429, 500, 502, 503,
]);
const isErrorStatus = (status: number): status is ErrorStatus => ERROR_STATUSES.has(status);

/**
 * A refusal an endpoint rendered (its status and `{ error, ...extra }` body), raised again as the
 * same error: a status or code outside the closed map is a bug, never passed on.
 */
export function refusalAgain(status: number, body: Record<string, unknown>): ApiError {
  const { error, ...extra } = body;
  if (typeof error !== "string" || !isErrorStatus(status))
    throw new Error(`not a refusal of the error map: ${status} ${String(error)}`);
  return new ApiError<ErrorCode>(status, codeWith(status, error), extra);
}
