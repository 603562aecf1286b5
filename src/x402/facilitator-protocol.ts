import { z } from "zod";
import { protocolReason } from "./reasons";

/*
 * The x402 facilitator API as the official clients speak it: `@x402/core`'s HTTPFacilitatorClient
 * (version 2) and `x402`'s useFacilitator (version 1) post `{ x402Version, paymentPayload,
 * paymentRequirements }` to `/verify` and `/settle` and read `{ isValid, invalidReason?, payer }` and
 * `{ success, errorReason?, transaction, network, payer }`, from a 200 only. What does not have the
 * protocol's shape is refused before anything is read (400); everything about the payment itself is
 * answered in the protocol's words.
 */

const hex = (bytes?: number) =>
  z.string().regex(bytes ? new RegExp(`^0x[0-9a-fA-F]{${bytes * 2}}$`) : /^0x[0-9a-fA-F]+$/);
const uintString = z.string().regex(/^\d{1,78}$/, "a non-negative integer as a decimal string");
const record = z.record(z.string(), z.unknown());

const ExactPayload = z.looseObject({
  signature: hex(),
  authorization: z.looseObject({
    from: hex(20),
    to: hex(20),
    value: uintString,
    validAfter: uintString,
    validBefore: uintString,
    nonce: hex(32),
  }),
});

/**
 * The paid URL, kept on the charge and shown publicly: the route's own http(s) address, as the
 * middlewares send it, and no longer than a URL a browser keeps.
 */
const ResourceUrl = z.url({ protocol: /^https?$/ }).max(2_048);

const RequirementsV1 = z.looseObject({
  scheme: z.string().min(1),
  network: z.string().min(1),
  maxAmountRequired: uintString,
  resource: ResourceUrl,
  description: z.string().max(2_000),
  mimeType: z.string().max(200).optional(),
  outputSchema: record.nullish(),
  payTo: hex(20),
  maxTimeoutSeconds: z.number().int().positive(),
  asset: hex(20),
  extra: record.nullish(),
});

const RequirementsV2 = z.looseObject({
  scheme: z.string().min(1),
  network: z.string().min(3),
  amount: uintString,
  asset: hex(20),
  payTo: hex(20),
  maxTimeoutSeconds: z.number().int().positive(),
  extra: record.nullish(),
});

const ResourceInfo = z.looseObject({
  url: ResourceUrl,
  description: z.string().max(2_000).nullish(),
  mimeType: z.string().max(200).nullish(),
});

const RequestV1 = z.object({
  x402Version: z.literal(1),
  paymentPayload: z.looseObject({
    x402Version: z.literal(1),
    scheme: z.string().min(1),
    network: z.string().min(1),
    payload: ExactPayload,
  }),
  paymentRequirements: RequirementsV1,
});

const RequestV2 = z.object({
  x402Version: z.literal(2),
  paymentPayload: z.looseObject({
    x402Version: z.literal(2),
    resource: ResourceInfo.nullish(),
    accepted: RequirementsV2,
    payload: ExactPayload,
    extensions: record.nullish(),
  }),
  paymentRequirements: RequirementsV2,
});

/** A verify or settle request body; the payload's version is the request's. */
export const FacilitatorRequest = z.discriminatedUnion("x402Version", [RequestV1, RequestV2]);
export type FacilitatorRequest = z.infer<typeof FacilitatorRequest>;

/** What a request's requirements ask, in one shape for both versions. */
export interface Asked {
  version: 1 | 2;
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  /** Token base units. */
  value: bigint;
  resource: string | null;
  description: string | null;
  mimeType: string | null;
}

/** The requirements' asks; version 2 takes the resource from the payload, where the protocol carries it. */
export function askedOf(request: FacilitatorRequest): Asked {
  if (request.x402Version === 1) {
    const r = request.paymentRequirements;
    return {
      version: 1,
      scheme: r.scheme,
      network: r.network,
      asset: r.asset,
      payTo: r.payTo,
      value: BigInt(r.maxAmountRequired),
      resource: r.resource,
      description: r.description || null,
      mimeType: r.mimeType ?? null,
    };
  }
  const r = request.paymentRequirements;
  const info = request.paymentPayload.resource;
  return {
    version: 2,
    scheme: r.scheme,
    network: r.network,
    asset: r.asset,
    payTo: r.payTo,
    value: BigInt(r.amount),
    resource: info?.url ?? null,
    description: info?.description || null,
    mimeType: info?.mimeType ?? null,
  };
}

/**
 * The version 2 `exact` EVM facilitator's codes (`@x402/evm`) for the service's own reasons; a code
 * the service shares with it is itself. Where `@x402/evm` has no code for the case (an asset the
 * service does not settle, a payer screening refused), the x402 specification's generic one is given.
 */
const V2_REASONS: Record<string, string> = {
  invalid_exact_evm_payload_recipient_mismatch: "invalid_exact_evm_recipient_mismatch",
  invalid_exact_evm_payload_signature: "invalid_exact_evm_signature",
  invalid_exact_evm_payload_authorization_value: "invalid_exact_evm_payload_authorization_value_mismatch",
  invalid_exact_evm_payload_authorization_valid_before: "invalid_exact_evm_payload_authorization_valid_before",
  invalid_exact_evm_payload_authorization_window_too_long: "invalid_exact_evm_payload_authorization_valid_before",
  invalid_exact_evm_payload_authorization_valid_after: "invalid_exact_evm_payload_authorization_valid_after",
  invalid_exact_evm_nonce_already_used: "invalid_exact_evm_nonce_already_used",
  authorization_canceled: "invalid_exact_evm_nonce_already_used",
  insufficient_funds: "invalid_exact_evm_insufficient_balance",
  simulation_failed: "invalid_exact_evm_transaction_simulation_failed",
  invalid_exact_evm_transaction_simulation_failed: "invalid_exact_evm_transaction_simulation_failed",
  transaction_reverted: "invalid_exact_evm_transaction_failed",
  invalid_exact_evm_transaction_failed: "invalid_exact_evm_transaction_failed",
  authorization_used_without_transfer: "invalid_exact_evm_transfer_event_mismatch",
  invalid_network: "invalid_exact_evm_network_mismatch",
  unsupported_scheme: "invalid_exact_evm_scheme",
  invalid_asset: "invalid_payment_requirements",
  invalid_payment_requirements: "invalid_payment_requirements",
  payer_blocked: "invalid_payment",
  invalid_payload: "invalid_payload",
  charge_settlement_in_progress: "invalid_transaction_state",
  x402_payment_in_use: "invalid_transaction_state",
  authorization_expired_unused: "invalid_exact_evm_payload_authorization_valid_before",
};

/**
 * Version 1 answers only in `x402` 1.x's ErrorReasons (its clients parse them against that list):
 * the chain refusing a transfer, or its nonce being used, has no code of its own there and is
 * `invalid_transaction_state`.
 */
const V1_CODES: ReadonlySet<string> = new Set([
  "insufficient_funds",
  "invalid_exact_evm_payload_authorization_valid_after",
  "invalid_exact_evm_payload_authorization_valid_before",
  "invalid_exact_evm_payload_authorization_value",
  "invalid_exact_evm_payload_signature",
  "invalid_exact_evm_payload_recipient_mismatch",
  "invalid_network",
  "invalid_payload",
  "invalid_payment_requirements",
  "invalid_scheme",
  "invalid_payment",
  "payment_expired",
  "unsupported_scheme",
  "invalid_x402_version",
  "invalid_transaction_state",
  "unexpected_settle_error",
  "unexpected_verify_error",
]);

/** The protocol code a facilitator answer of `version` gives for one of the service's reasons. */
export function facilitatorReason(reason: string, version: 1 | 2, phase: "verify" | "settle"): string {
  const code = reason.split(":")[0]!.trim();
  const unexpected = phase === "verify" ? "unexpected_verify_error" : "unexpected_settle_error";
  if (version === 2) return V2_REASONS[code] ?? unexpected;
  if (code === "invalid_asset") return "invalid_payment_requirements";
  if (V1_CODES.has(code)) return code;
  const general = protocolReason(code, phase);
  return V1_CODES.has(general) ? general : "invalid_transaction_state";
}

export type VerifyAnswer = { isValid: true; payer: string } | { isValid: false; invalidReason: string; payer?: string };

export type SettleAnswer = {
  success: boolean;
  errorReason?: string;
  transaction: string;
  network: string;
  payer?: string;
};
