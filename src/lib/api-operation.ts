import type { z } from "zod";
import { CredentialNotAllowed, CredentialRequired, ErrorBody, InternalError, InvalidRequest } from "./api-shapes";
import type { CodeWith, DocumentedCode } from "./error-codes";

/**
 * How an operation is documented: each domain lists its own beside its routes
 * (`<domain>/operations.ts`), and src/openapi/ gathers them into the document.
 * Request schemas are the very objects the routes validate with; the contract
 * test proves the gathered list and the app's route table are the same set.
 */

export type Method = "get" | "post" | "put" | "patch" | "delete";
export type Auth = "merchant" | "agent" | "console" | "public" | "page";

export interface HeaderParam {
  name: string;
  description: string;
  required?: boolean;
}

export interface ResponseSpec {
  description: string;
  /** A registered response schema, or several (any of them); absent when the body is not JSON. */
  schema?: z.ZodType | z.ZodType[];
  /** Default `application/json`. */
  contentType?: string;
  headers?: Record<string, string>;
  /** The `error` codes this answer may carry; the document checks each against its status in `ERROR_CODES`. */
  errors?: readonly DocumentedCode[];
  /**
   * A cross-cutting answer (rate limit, body size, crash, an Idempotency-Key
   * conflict) that every operation of its kind may give: documented, but the
   * contract test does not require to see it on each operation.
   */
  generic?: boolean;
  /** Shared under this name in `components.responses`. */
  component?: string;
}

export interface Operation {
  method: Method;
  /** As Hono writes it (`/charges/:chargeId`); the document uses `{chargeId}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  /** One of the document's tags (src/openapi/tags.ts). */
  tag: string;
  auth: Auth;
  params?: z.ZodObject;
  query?: z.ZodObject;
  headers?: HeaderParam[];
  /** A JSON body, registered in `requestSchemas`. */
  body?: z.ZodType;
  /** The body may be left out altogether (no body, no Content-Type: every field takes its default). */
  bodyOptional?: true;
  /** A form body (console pages), for the reader only: those handlers read fields one by one. */
  form?: Record<string, string>;
  responses: Record<number, ResponseSpec>;
}

// ---------------------------------------------------------------------------
// Responses every operation of a kind shares.

export const json = (
  schema: z.ZodType | z.ZodType[],
  description: string,
  extra: Partial<ResponseSpec> = {},
): ResponseSpec => ({ description, schema, ...extra });

/** `{ error }` with the codes it may carry. */
export const error = (description: string, ...errors: DocumentedCode[]): ResponseSpec =>
  json(ErrorBody, description, { errors });

export const RATE_LIMITED: ResponseSpec = {
  ...error("Too many requests (`too_many_requests`); `Retry-After` says when to come back.", "too_many_requests"),
  headers: { "Retry-After": "Seconds to wait." },
  generic: true,
  component: "RateLimited",
};
export const CRASHED: ResponseSpec = {
  ...json(InternalError, "An unexpected failure, with the request id the log carries.", { errors: ["internal_error"] }),
  generic: true,
  component: "InternalError",
};
export const TOO_LARGE: ResponseSpec = {
  ...error("The body is over 64 KiB (`payload_too_large`).", "payload_too_large"),
  generic: true,
  component: "PayloadTooLarge",
};
export const OVERLOADED: ResponseSpec = {
  ...error("A wallet or ledger object shedding load (`overloaded`); retry after `Retry-After`.", "overloaded"),
  headers: { "Retry-After": "Seconds to wait." },
  generic: true,
  component: "Overloaded",
};
export const NOT_UTF8: ResponseSpec = {
  ...error(
    "The JSON body declares a charset other than UTF-8, or starts with a byte-order mark (`unsupported_media_type`).",
    "unsupported_media_type",
  ),
  generic: true,
  component: "UnsupportedMediaType",
};
export const INVALID: ResponseSpec = {
  ...json(InvalidRequest, "An invalid body, path or query: `invalid_request` with `issues`.", {
    errors: ["invalid_request"],
  }),
  component: "InvalidRequest",
};
export const NOT_FOUND = (what: string, code: CodeWith<404>) => error(`Unknown ${what}.`, code);

export const IDEMPOTENCY_KEY: HeaderParam = {
  name: "Idempotency-Key",
  description:
    "Optional, 1 to 255 printable ASCII characters, scoped to the credential. The same key with the same request replays the first answer (with `Idempotent-Replayed: true`); with another request it is 409 `idempotency_key_reused`; while the first is still running, 409 `idempotency_key_in_use`.",
};
export const IDEMPOTENCY_CONFLICT: ResponseSpec = {
  ...error("`idempotency_key_reused` or `idempotency_key_in_use`.", "idempotency_key_reused", "idempotency_key_in_use"),
  generic: true,
  component: "IdempotencyConflict",
};
export const BAD_IDEMPOTENCY_KEY: ResponseSpec = {
  ...json(InvalidRequest, "A malformed `Idempotency-Key` header.", { errors: ["invalid_request"] }),
  generic: true,
  component: "InvalidIdempotencyKey",
};
export const UNAUTHENTICATED: ResponseSpec = {
  ...json(
    CredentialRequired,
    "No credential, or not a valid one; the message names the credential this operation expects.",
    { errors: ["merchant_api_key_required", "agent_api_key_required", "console_session_required"] },
  ),
  component: "CredentialRequired",
};
export const WRONG_CREDENTIAL: ResponseSpec = {
  ...json(CredentialNotAllowed, "A valid credential of another kind.", { errors: ["credential_not_allowed"] }),
  component: "CredentialNotAllowed",
};

export const X402_HEADERS: HeaderParam[] = [
  {
    name: "X-PAYMENT",
    description: "The signed x402 payment: base64url (or padded base64) of the payload JSON (x402 version 1).",
  },
  { name: "PAYMENT-SIGNATURE", description: "The same payment as x402 version 2 clients send it." },
];

/** A server-rendered page. */
export const HTML = (description: string): ResponseSpec => ({ description, contentType: "text/html" });
