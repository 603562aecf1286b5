import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * The one error type thrown at the HTTP edge. `app.onError` renders it as
 * `{ error, ...extra }` with its status; services return tagged results instead.
 */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly error: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(error);
    this.name = "ApiError";
  }
}

export const notFound = (error = "not_found") => new ApiError(404, error);
