import { z } from "zod";
import { decodeUtf8, findJsonTextIssue } from "../lib/strict-json";

const hex = (bytes?: number) =>
  z.string().regex(bytes ? new RegExp(`^0x[0-9a-fA-F]{${bytes * 2}}$`) : /^0x[0-9a-fA-F]+$/);
const uintString = z.string().regex(/^\d{1,78}$/);

// Addresses in any letter case (EIP-712 signs their bytes), compared in lower case: a checksum is not asked of a payload.
const Authorization = z.object({
  from: hex(20).transform((a) => a.toLowerCase()),
  to: hex(20).transform((a) => a.toLowerCase()),
  value: uintString,
  validAfter: uintString,
  validBefore: uintString,
  nonce: hex(32),
});

const ExactPayload = z.object({ signature: hex(), authorization: Authorization });

const PayloadV1 = z.object({
  x402Version: z.literal(1),
  scheme: z.string(),
  network: z.string(),
  payload: ExactPayload,
});

/** x402 v2's `payment-identifier` extension: the client's id for one logical purchase, kept across its retries. */
export const PAYMENT_IDENTIFIER = "payment-identifier";
const PaymentIdentifier = z.string().regex(/^[a-zA-Z0-9_-]{16,128}$/);

/**
 * The payment identifier a v2 payload carries, null when none. A malformed one makes the payload
 * invalid rather than ignored: a retry the service could not recognize as one would pay twice.
 */
const IdentifierExtension = z
  .object({ info: z.object({ id: PaymentIdentifier.optional() }).passthrough() })
  .passthrough()
  .optional();

const PayloadV2 = z.object({
  x402Version: z.literal(2),
  accepted: z
    .object({ scheme: z.string(), network: z.string(), amount: uintString, asset: hex(20), payTo: hex(20) })
    .passthrough(),
  payload: ExactPayload,
  resource: z.unknown().optional(),
  extensions: z
    .object({ [PAYMENT_IDENTIFIER]: IdentifierExtension })
    .passthrough()
    .optional(),
});

export type Authorization = z.infer<typeof Authorization>;

/** A payment header, decoded and normalized across protocol versions. */
export interface DecodedPayment {
  version: 1 | 2;
  scheme: string;
  /** v1 network name, or v2 CAIP-2 id, as sent. */
  network: string;
  /** v2 only: the asset and payee the client says it accepted. */
  accepted: { asset: string; payTo: string; amount: string } | null;
  authorization: Authorization;
  signature: `0x${string}`;
  /** v2 `payment-identifier` extension's id: a retry of one purchase carries the same one. */
  paymentIdentifier: string | null;
  /** The decoded JSON exactly as sent, for a remote facilitator. */
  raw: unknown;
}

/**
 * Decodes `X-PAYMENT` / `PAYMENT-SIGNATURE`: base64url (the spec) or standard
 * base64 with padding (what official clients send) of UTF-8 JSON. Null when
 * it is not a payment we understand.
 */
export function decodePaymentHeader(header: string): DecodedPayment | null {
  const text = header.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text) || text.length > 16_384) return null;
  let json: unknown;
  try {
    const normalized = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
    const binary = atob(normalized + "===".slice((normalized.length + 3) % 4));
    // A plain loop: Uint8Array.from with a mapping callback cost more than the rest of the decoding.
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const decoded = decodeUtf8(bytes);
    if (decoded === null) return null;
    json = JSON.parse(decoded);
    // Read as strictly as a JSON body: with a key twice, this service and a remote facilitator could read different payments.
    if (findJsonTextIssue(decoded)) return null;
  } catch {
    return null;
  }
  return decodePaymentJson(json);
}

/** A payment payload already parsed from JSON (a header's, or a facilitator request's `paymentPayload`), normalized; null when not one we understand. */
export function decodePaymentJson(json: unknown): DecodedPayment | null {
  // Each schema requires its own version, so only the one the payload names is tried: a version 2
  // payment is not first refused, at the cost of building that refusal, as a version 1 one.
  const version = typeof json === "object" && json !== null ? (json as { x402Version?: unknown }).x402Version : null;
  if (version !== 1 && version !== 2) return null;
  const v1 = version === 1 ? PayloadV1.safeParse(json) : { success: false as const };
  if (v1.success) {
    const p = v1.data;
    return {
      version: 1,
      scheme: p.scheme,
      network: p.network,
      accepted: null,
      authorization: p.payload.authorization,
      signature: p.payload.signature as `0x${string}`,
      paymentIdentifier: null,
      raw: json,
    };
  }
  const v2 = version === 2 ? PayloadV2.safeParse(json) : { success: false as const };
  if (v2.success) {
    const p = v2.data;
    return {
      version: 2,
      scheme: p.accepted.scheme,
      network: p.accepted.network,
      accepted: {
        asset: p.accepted.asset.toLowerCase(),
        payTo: p.accepted.payTo.toLowerCase(),
        amount: p.accepted.amount,
      },
      authorization: p.payload.authorization,
      signature: p.payload.signature as `0x${string}`,
      paymentIdentifier: p.extensions?.[PAYMENT_IDENTIFIER]?.info.id ?? null,
      raw: json,
    };
  }
  return null;
}
