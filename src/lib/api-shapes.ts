import { z } from "zod";
import { ID_PREFIXES } from "./ids";

/**
 * Response bodies, in zod, as the views in each domain's service render them;
 * each domain declares its own beside its routes (`<domain>/responses.ts`).
 * They are strict (`additionalProperties: false`) on purpose: a field a view
 * adds or drops without the document following fails the contract test
 * (test/openapi/contract.test.ts), and the typed client is generated from them.
 */
export const responseSchemas = z.registry<{ id: string; description?: string }>();

/** A response body under `id` in `components.schemas`. */
export const named = <T extends z.ZodType>(id: string, schema: T, description?: string): T => {
  responseSchemas.add(schema, description === undefined ? { id } : { id, description });
  return schema;
};

/** Request bodies by name in `components.schemas`; converted as zod input (what a client sends). */
export const requestSchemas = z.registry<{ id: string; description?: string }>();

/** A request body under `id`: the very schema the route validates with. */
export const body = <T extends z.ZodType>(id: string, schema: T): T => {
  if (!requestSchemas.has(schema)) requestSchemas.add(schema, { id });
  return schema;
};

export const prefixed = (kind: keyof typeof ID_PREFIXES) => z.string().regex(new RegExp(`^${ID_PREFIXES[kind]}`));
/** ISO 8601 in UTC, as `Date.prototype.toISOString` writes it. */
export const Timestamp = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
  .meta({ format: "date-time" });
export const Cents = z.number().int().nonnegative();
/** An exact amount in the token's base units (6 decimals: 1 cent = 10,000), as a decimal string: it can pass 2^53. */
/**
 * An amount in cents when it is a whole number of them, else null: `amountBaseUnits` beside it
 * states it exactly. `described` says whose amount it is.
 */
export const CentsIfWhole = (described: string) => z.number().int().positive().nullable().describe(described);

export const BaseUnits = z
  .string()
  .regex(/^-?\d+$/)
  .describe("Token base units as a decimal string (1 cent = 10,000; they can pass 2^53).");
export const Usd = z.literal("USD");
export const EvmAddress = z.string().regex(/^0x[a-fA-F0-9]{40}$/);

/** When a rolled key's predecessor stops working. */
export const PreviousKeyExpiresAt = Timestamp.describe(
  "Until then the key this one replaces still works (now, for a grace of 0); after it, 401.",
);

// ---------------------------------------------------------------------------
// Errors: `{ error }`, plus the few extras `ApiError` carries.

export const ErrorBody = named(
  "Error",
  z.strictObject({ error: z.string() }),
  "Every failure: `{ error: <string> }`; each response lists the codes it may carry in `x-error-codes`.",
);

export const InvalidRequest = named(
  "InvalidRequest",
  z.strictObject({
    error: z.literal("invalid_request"),
    issues: z.array(z.strictObject({ path: z.string(), code: z.string(), message: z.string() })),
  }),
  "An invalid body, query or header: where and what, never the rejected value.",
);

export const CredentialRequired = named(
  "CredentialRequired",
  z.strictObject({
    error: z.enum(["merchant_api_key_required", "agent_api_key_required", "console_session_required"]),
  }),
  "A missing or invalid credential; the message names the credential the operation expects.",
);

export const CredentialNotAllowed = named(
  "CredentialNotAllowed",
  z.strictObject({
    error: z.literal("credential_not_allowed"),
    expected: z.enum(["merchant_api_key", "agent_api_key", "console_session"]),
  }),
  "A valid credential of another kind.",
);

export const InternalError = named(
  "InternalError",
  z.strictObject({ error: z.literal("internal_error"), requestId: z.string() }),
);
