import { z } from "zod";
import { MAX_AMOUNT_MINOR, USDC_UNITS_PER_CENT } from "../../lib/money";

/**
 * The most `accepts` entries a 402 answer handed to the service may list. Sellers offer one entry
 * per network and asset; 32 is far above any real one and keeps a hostile list from costing work.
 */
export const MAX_ACCEPTS = 32;
/** The longest an authorization the service signs for someone else's paywall stays valid (seconds). */
export const MAX_OUTBOUND_TIMEOUT_SECONDS = 3600;
/** The largest single amount the service moves anywhere (MAX_AMOUNT_MINOR cents), in token base units: 10^15. */
export const MAX_OUTBOUND_BASE_UNITS = BigInt(MAX_AMOUNT_MINOR) * USDC_UNITS_PER_CENT;
/** Longest URL taken, as resource or as a v2 `resource.url`. */
export const MAX_URL_LENGTH = 2048;

/**
 * A decimal string of token base units: positive, digits only (no sign, decimal point or exponent),
 * at most MAX_OUTBOUND_BASE_UNITS.
 */
export function isBaseUnits(text: string): boolean {
  return /^[1-9][0-9]{0,15}$/.test(text) && BigInt(text) <= MAX_OUTBOUND_BASE_UNITS;
}

const baseUnits = z
  .string()
  .refine(isBaseUnits, `must be a positive whole number of base units, at most ${MAX_OUTBOUND_BASE_UNITS}`);

/** An absolute http or https URL. */
export function isHttpUrl(text: string): boolean {
  if (text.length > MAX_URL_LENGTH) return false;
  try {
    const { protocol } = new URL(text);
    return protocol === "https:" || protocol === "http:";
  } catch {
    return false;
  }
}

const httpUrl = z.string().max(MAX_URL_LENGTH).refine(isHttpUrl, "must be an absolute http(s) URL");

const text = (max: number) => z.string().max(max);

/**
 * One `accepts` entry, as loose as the protocol allows: an entry of another network (a Solana one, an
 * unknown scheme) is skipped, not refused, so a seller's multi-network 402 stays payable. Lengths are
 * bounded; the entry the service pays is checked strictly when chosen (choice.ts). Fields it does
 * not know are kept: a version 2 payment echoes its entry exactly, and sellers compare it whole.
 */
const AcceptsEntry = z.looseObject({
  scheme: text(64),
  network: text(128),
  amount: text(128).optional(),
  maxAmountRequired: text(128).optional(),
  asset: text(128).optional(),
  payTo: text(128).optional(),
  maxTimeoutSeconds: z.number().optional(),
  resource: text(MAX_URL_LENGTH).optional(),
  extra: z.record(z.string(), z.unknown()).nullish(),
});
export type AcceptsEntry = z.infer<typeof AcceptsEntry>;

const accepts = z.array(AcceptsEntry).min(1).max(MAX_ACCEPTS);

/** A version 1 402 body: `{ x402Version: 1, accepts }` (its `error` and anything else are not needed). */
const PaymentRequiredV1 = z.object({ x402Version: z.literal(1), accepts });

/**
 * A decoded version 2 `PAYMENT-REQUIRED`. `resource` and `extensions` are kept as sent: the payment
 * repeats them, as the official client does.
 */
const PaymentRequiredV2 = z.object({
  x402Version: z.literal(2),
  resource: z.looseObject({ url: httpUrl }),
  accepts,
  extensions: z.record(z.string(), z.unknown()).optional(),
});

export const PaymentRequired = z.discriminatedUnion("x402Version", [PaymentRequiredV1, PaymentRequiredV2]);
export type PaymentRequired = z.infer<typeof PaymentRequired>;

/** `POST /agent/x402/payments`: what an agent hands over after a paywall answered 402. */
export const OutboundPaymentRequest = z.strictObject({
  resource: httpUrl,
  paymentRequired: PaymentRequired,
  maxAmountBaseUnits: baseUnits.optional(),
});
export type OutboundPaymentRequest = z.infer<typeof OutboundPaymentRequest>;
