/**
 * The reason codes an x402 client is answered with, all from the protocol's own vocabulary
 * (the v1 specification's ErrorReasons and the v2 `exact` EVM facilitator's codes), so a client
 * built on the reference SDKs can branch on them. The service's own reasons stay richer (the
 * payment row's `error` and the log keep them, with any detail after a colon); each is answered
 * as the protocol code that says the same thing.
 */
export const PROTOCOL_REASONS = [
  "insufficient_funds",
  "invalid_exact_evm_payload_authorization_valid_after",
  "invalid_exact_evm_payload_authorization_valid_before",
  "invalid_exact_evm_payload_authorization_value",
  "invalid_exact_evm_payload_recipient_mismatch",
  "invalid_exact_evm_payload_signature",
  "invalid_exact_evm_nonce_already_used",
  "invalid_exact_evm_transaction_simulation_failed",
  "invalid_exact_evm_transaction_failed",
  "invalid_exact_evm_transfer_event_mismatch",
  "invalid_network",
  "invalid_payload",
  "invalid_payment",
  "invalid_payment_requirements",
  "invalid_scheme",
  "invalid_transaction_state",
  "invalid_x402_version",
  "payment_expired",
  "unsupported_scheme",
  "unexpected_settle_error",
  "unexpected_verify_error",
] as const;

export type ProtocolReason = (typeof PROTOCOL_REASONS)[number];

const KNOWN: ReadonlySet<string> = new Set(PROTOCOL_REASONS);

/** The service's own reasons, by what they mean in the protocol's words. */
const TRANSLATED: Record<string, ProtocolReason> = {
  // The v2 `accepted` names another token: the requirements it answers are not ours.
  invalid_asset: "invalid_payment_requirements",
  // A window longer than the service takes: its validBefore is what is refused.
  invalid_exact_evm_payload_authorization_window_too_long: "invalid_exact_evm_payload_authorization_valid_before",
  // Screening refused the payer; the protocol has no code that names why, and none is given.
  payer_blocked: "invalid_payment",
  simulation_failed: "invalid_exact_evm_transaction_simulation_failed",
  transaction_reverted: "invalid_exact_evm_transaction_failed",
  // What is being paid is not in a state to take this payment (another settles it, the link was disabled).
  charge_settlement_in_progress: "invalid_transaction_state",
  charge_unavailable: "invalid_transaction_state",
  x402_payment_in_use: "invalid_transaction_state",
  checkout_link_disabled: "invalid_transaction_state",
  // Reconciliation's verdicts on a settlement the chain decided.
  authorization_expired_unused: "payment_expired",
  authorization_canceled: "invalid_exact_evm_nonce_already_used",
  authorization_used_without_transfer: "invalid_exact_evm_transfer_event_mismatch",
  // Released, then used on chain after its charge was paid another way: it paid nothing here (an operator returns it).
  used_after_release: "invalid_transaction_state",
};

/**
 * The protocol code for one of the service's reasons (or a remote facilitator's): a code already
 * in the protocol's list is itself; a known reason of the service's is translated; anything else
 * (a broadcast error, a facilitator's private code) is the protocol's "unexpected" code of the
 * phase it happened in.
 */
export function protocolReason(reason: string, phase: "verify" | "settle"): ProtocolReason {
  const code = reason.split(":")[0]!.trim();
  if (KNOWN.has(code)) return code as ProtocolReason;
  return TRANSLATED[code] ?? (phase === "verify" ? "unexpected_verify_error" : "unexpected_settle_error");
}
