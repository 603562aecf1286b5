import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { CodeWith, ErrorCode, StatusOf } from "./error-codes";

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
