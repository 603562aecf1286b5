/**
 * Every `error` the service answers, and the HTTP status it is answered with.
 * `ApiError` takes only these codes (a typo is a type error) and the OpenAPI
 * document lists each operation's codes from here. The Spanish codes are part
 * of the contract and stay as they are.
 */
export const ERROR_CODES = {
  // The request itself
  invalid_request: 400,
  payload_too_large: 413,
  unsupported_media_type: 415,
  not_found: 404,
  method_not_allowed: 405,
  too_many_requests: 429,
  internal_error: 500,
  overloaded: 503,
  csrf_token_invalid: 403,
  idempotency_key_reused: 409,
  idempotency_key_in_use: 409,
  /** The payment's batch found its Idempotency-Key reservation gone. */
  idempotency_key_released: 409,

  // Credentials and console sign-in
  merchant_api_key_required: 401,
  agent_api_key_required: 401,
  console_session_required: 401,
  credential_not_allowed: 403,
  invalid_code: 401,
  access_assertion_required: 401,
  access_assertion_invalid: 401,
  not_a_console_user: 403,
  access_sign_in_not_configured: 404,

  // Unknown objects
  merchant_not_found: 404,
  agent_not_found: 404,
  charge_not_found: 404,
  checkout_link_not_found: 404,
  settlement_not_found: 404,
  paylink_not_found: 404,
  approval_not_found: 404,
  webhook_endpoint_not_found: 404,
  delivery_not_found: 404,

  // A wallet's policy and balance (402)
  excede_tope_por_transaccion: 402,
  categoria_no_permitida: 402,
  excede_limite_diario: 402,
  /** A wallet's balance (402); a merchant's balance for a payout or a refund (409). */
  saldo_insuficiente: [402, 409],
  /**
   * Frozen by an operator: the agent itself is refused its payments (403); a merchant's draw on
   * its grant or a console grant of its approval meets a state of the agent (409).
   */
  agent_frozen: [403, 409],

  // States of charges, links and approvals (409)
  charge_not_pending: 409,
  charge_awaiting_approval: 409,
  checkout_link_disabled: 409,
  /** A wallet payment of an amount that is not whole cents to a charge in another ledger shard (not supported yet). */
  cross_shard_amount_not_whole_cents: 409,
  approval_not_pending: 409,
  approval_expired: 409,
  delivery_not_redeliverable: 409,

  // PayLinks
  paylink_expired: 409,
  paylink_exhausted: 409,
  max_uses_alcanzado: 409,
  sin_grant_del_agente: 409,
  /** A draw decided on figures that kept changing under it. */
  paylink_grant_changed: 409,
  /** A draw the wallet wanted to hold for a human: draws are already a human's decision. */
  unexpected_approval: 409,
  excede_tope_por_uso: 402,

  // Merchants and KYT
  payout_address_flagged: 403,

  // Money out: payouts and refunds
  payout_not_found: 404,
  refund_not_found: 404,
  /** A charge's evidence file before a checkpoint (anchored, where the deployment anchors) covers its payment. */
  evidence_not_ready: 409,
  payout_address_missing: 409,
  charge_not_paid: 409,
  refund_exceeds_remaining: 409,
  refund_destination_flagged: 403,
  /** Payouts and on-chain refunds need the settlement key, a gas key and the chain (docs/operations.md). */
  treasury_not_configured: 503,
  /** The settlement address, less what its outstanding x402 authorizations may still take, cannot cover an agent's x402 payment. */
  treasury_insufficient_funds: 503,

  // The operator's float: fundings of the treasury
  /** The transaction carries no transfer of the token to the settlement address (or is not mined, or reverted). */
  no_funding_transfer: 400,
  funding_already_booked: 409,
  /** Mined, not yet as deep as DEPOSIT_CONFIRMATIONS: send it again later. */
  funding_not_confirmed: 409,
  /** A sweep, x402 settlement or deposit the ledger already counts. */
  funding_already_counted: 409,

  // x402: the `error` of the 402 terms body, and what keeps a payment from being tried
  "X-PAYMENT header is required": 402,
  "Pago inválido": 402,
  "Liquidación fallida": 402,
  x402_not_configured: 503,
  chain_unavailable: 503,
  facilitator_unavailable: 503,

  // An agent's payments of x402 paywalls anywhere (outbound)
  agent_x402_payment_not_found: 404,
  /** The agent's policy names no host of the resource (`allowedX402Hosts`; absent: outbound x402 is off). */
  x402_host_not_allowed: 403,
  /** The chosen entry's `payTo` fails screening (the OFAC list or the operators' blocklist). */
  payee_flagged: 403,
  /** The chosen entry's amount is above the request's `maxAmountBaseUnits`. */
  over_max_amount: 402,
  /** No `accepts` entry on the service's scheme, network and asset. */
  unsupported_payment_requirements: 400,
  /** The entry on the service's rails is malformed (`problem`: amount, max_timeout_seconds, pay_to, eip712_domain, resource). */
  invalid_payment_requirements: 400,
  /** MCP `pay_x402_resource`: the URL, or a redirect's target, is not one the service fetches (`reason`). */
  resource_url_forbidden: 400,
  /** MCP `pay_x402_resource`: the resource did not answer (timeout, connection, too many redirects; `reason`). */
  resource_unreachable: 502,

  // Audit checkpoints
  checkpoint_not_found: 404,
  /** A checkpoint signs the head of the audit chain: a chain without rows has none to sign. */
  audit_chain_empty: 409,
} as const satisfies Record<string, ErrorStatus | readonly ErrorStatus[]>;

export type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 405 | 409 | 413 | 415 | 429 | 500 | 502 | 503;

/** The one code that carries a figure: the cents left on a PayLink grant (402). */
export type BudgetLeftCode = `excede_presupuesto_restante_${number}`;
const BUDGET_LEFT = /^excede_presupuesto_restante_\d+$/;
/** How the document names the budget code, its figure left open. */
export const BUDGET_LEFT_PATTERN = "excede_presupuesto_restante_<N>" as const;

export type FixedErrorCode = keyof typeof ERROR_CODES;
export type ErrorCode = FixedErrorCode | BudgetLeftCode;
/** A code as the document lists it: the budget code with its figure left open. */
export type DocumentedCode = FixedErrorCode | typeof BUDGET_LEFT_PATTERN;

type StatusesOf<E> = E extends readonly (infer S)[] ? S : E;
/** The status (or statuses) a code is answered with. */
export type StatusOf<C extends ErrorCode> = C extends FixedErrorCode ? StatusesOf<(typeof ERROR_CODES)[C]> : 402;

/** The codes answered with status `S`. */
export type CodeWith<S extends ErrorStatus> =
  | { [C in FixedErrorCode]: S extends StatusesOf<(typeof ERROR_CODES)[C]> ? C : never }[FixedErrorCode]
  | (S extends 402 ? BudgetLeftCode : never);

/** A refusal two modules decide and compare (a policy and a batch guard): one spelling for both. */
export const INSUFFICIENT_BALANCE = "saldo_insuficiente" satisfies ErrorCode;

export const budgetLeftCode = (centsLeft: number): BudgetLeftCode => `excede_presupuesto_restante_${centsLeft}`;

export const isErrorCode = (value: string): value is ErrorCode =>
  Object.hasOwn(ERROR_CODES, value) || BUDGET_LEFT.test(value);

/**
 * A reason a service computed at run time (a batch guard's, a wallet outcome's) as the code it
 * is: every such reason is in the map, so an unknown one is a bug, not an answer.
 */
export function knownErrorCode(reason: string): ErrorCode {
  if (!isErrorCode(reason)) throw new Error(`not a known error code: ${reason}`);
  return reason;
}

/** A run-time reason as a code answered with `status`; anything else is a bug. */
export function codeWith<S extends ErrorStatus>(status: S, reason: string): CodeWith<S> {
  if (!knownStatuses(knownErrorCode(reason)).includes(status))
    throw new Error(`error code ${reason} is not answered with ${status}`);
  return reason as CodeWith<S>;
}

/** Every status a code may be answered with. */
export function knownStatuses(code: ErrorCode | DocumentedCode): readonly ErrorStatus[] {
  if (!Object.hasOwn(ERROR_CODES, code)) return [402];
  const entry: ErrorStatus | readonly ErrorStatus[] = ERROR_CODES[code as FixedErrorCode];
  return typeof entry === "number" ? [entry] : entry;
}
