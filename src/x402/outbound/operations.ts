import { z } from "zod";
import { AgentParam } from "../../agents/routes";
import { error, INVALID, json, NOT_FOUND, type Operation } from "../../lib/api-operation";
import {
  BaseUnits,
  body,
  CredentialNotAllowed,
  ErrorBody,
  EvmAddress,
  named,
  prefixed,
  Timestamp,
} from "../../lib/api-shapes";
import { OutboundPaymentRequest } from "./request";
import { X402PaymentParam, X402PaymentsQuery } from "./routes";

/** Response bodies: an agent's payments of x402 paywalls anywhere. */

const AgentX402Payment = named(
  "AgentX402Payment",
  z.strictObject({
    paymentId: prefixed("agentX402Payment"),
    agentId: prefixed("agent"),
    resource: z.string().describe("The URL paid for, as the agent handed it over."),
    payTo: EvmAddress.describe("Who the authorization pays (checksummed)."),
    network: z.string().describe("As the paywall's entry named it (`base-sepolia`, or `eip155:<chainId>`)."),
    asset: EvmAddress,
    amountBaseUnits: BaseUnits.describe("Exactly what the authorization moves and the wallet was debited."),
    status: z
      .enum(["authorized", "settled", "released"])
      .describe(
        "`authorized`: signed and debited. `settled`: the token shows the authorization used (`transaction` set). `released`: its `validBefore` passed with the authorization unused, and the debit was given back.",
      ),
    transaction: z.string().nullable().describe("The transaction that used the authorization, once settled."),
    validBefore: Timestamp.describe("After this the authorization can no longer be used."),
    createdAt: Timestamp,
    settledAt: Timestamp.nullable(),
  }),
  "An agent's payment of an x402 paywall: an EIP-3009 authorization signed from the settlement address.",
);

const X402PendingApproval = named(
  "X402PendingApproval",
  z.strictObject({
    pendingApproval: z.literal(true),
    reason: z.string(),
    approvalId: prefixed("approval"),
    expiresAt: Timestamp,
  }),
  "The payment is held for a human (status 402): nothing was signed or debited. Asking again while it is pending returns the same approval; once a console user grants it, the same request (same `resource`, `payTo`, network, asset and exact amount) made before `expiresAt` pays, once.",
);

const AgentX402PaymentMade = named(
  "AgentX402PaymentMade",
  z.strictObject({
    payment: AgentX402Payment,
    header: z.strictObject({
      name: z.enum(["X-PAYMENT", "PAYMENT-SIGNATURE"]),
      value: z.string().describe("Base64 of the signed payment, as the paywall's version expects it."),
    }),
  }),
  "The payment, and the header the agent sends with its request again.",
);

const AgentX402PaymentList = named("AgentX402PaymentList", z.strictObject({ payments: z.array(AgentX402Payment) }));
const AgentX402PaymentOne = named("AgentX402PaymentOne", z.strictObject({ payment: AgentX402Payment }));

/** An agent pays x402 paywalls anywhere from its wallet; the console lists those payments. */
export const AGENT_X402_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/agent/x402/payments",
    operationId: "payX402Resource",
    summary: "Pay an x402 paywall from the agent's wallet",
    description:
      "The agent hands over a 402's terms (the version 1 body, or the decoded version 2 `PAYMENT-REQUIRED`) and the resource URL. The service picks the first `accepts` entry it can pay (scheme `exact`, its network and asset), the agent's policy decides (`allowedX402Hosts`, the per-transaction cap, the daily limit, the balance: the category rule does not apply), above the approval threshold the payment is held for a human (402 `pendingApproval`) until a console user grants it and the agent asks again; and the service signs an EIP-3009 authorization from its settlement address for exactly that amount to that `payTo`, debiting the wallet in the same batch that records the payment. `Idempotency-Key` answers the same header again.",
    tag: "Agent wallet",
    auth: "agent",
    body: body("AgentX402PaymentRequest", OutboundPaymentRequest),
    responses: {
      201: json(AgentX402PaymentMade, "Signed and debited."),
      400: json(
        [ErrorBody],
        "No entry on the service's scheme, network and asset (`unsupported_payment_requirements`); the one on them malformed (`invalid_payment_requirements`, with `problem` and `index`); or the request itself (`invalid_request`).",
        { errors: ["unsupported_payment_requirements", "invalid_payment_requirements", "invalid_request"] },
      ),
      402: json(
        [X402PendingApproval, ErrorBody],
        "Held for a human above the approval threshold (`pendingApproval`); refused by the policy (`excede_tope_por_transaccion`, `excede_limite_diario`, `saldo_insuficiente`); or above the request's `maxAmountBaseUnits` (`over_max_amount`). Nothing is signed or debited.",
        { errors: ["excede_tope_por_transaccion", "excede_limite_diario", "saldo_insuficiente", "over_max_amount"] },
      ),
      403: json(
        [ErrorBody, CredentialNotAllowed],
        "The agent is frozen (`agent_frozen`); its policy allows no x402 payment to the resource's host (`x402_host_not_allowed`); the entry's `payTo` fails screening (`payee_flagged`); or a credential of another kind.",
        { errors: ["agent_frozen", "x402_host_not_allowed", "payee_flagged"] },
      ),
      409: {
        ...error(
          "The payment's batch found its Idempotency-Key reservation gone (`idempotency_key_released`), or its granted approval kept being used by another payment of the agent at once (`approval_not_pending`).",
          "idempotency_key_released",
          "approval_not_pending",
        ),
        // A keyed request whose reservation expired under it: a race no request provokes on purpose.
        generic: true,
      },
      503: {
        ...error(
          "The settlement address, less what its outstanding authorizations may still take, cannot cover the amount (`treasury_insufficient_funds`; nothing is debited); the chain could not be read to tell (`chain_unavailable`); the deployment takes no x402 (`x402_not_configured`) or holds no settlement key (`treasury_not_configured`); or the wallet is shedding load (`overloaded`, with `Retry-After`).",
          "treasury_insufficient_funds",
          "chain_unavailable",
          "x402_not_configured",
          "treasury_not_configured",
          "overloaded",
        ),
        // A deployment's configuration, not something a request can provoke here.
        generic: true,
      },
    },
  },
  {
    method: "get",
    path: "/agent/x402/payments",
    operationId: "listAgentX402Payments",
    summary: "The agent's x402 payments",
    description: "Newest first.",
    tag: "Agent wallet",
    auth: "agent",
    query: X402PaymentsQuery,
    responses: { 200: json(AgentX402PaymentList, "Payments."), 400: INVALID },
  },
  {
    method: "get",
    path: "/agent/x402/payments/:paymentId",
    operationId: "getAgentX402Payment",
    summary: "One of the agent's x402 payments",
    tag: "Agent wallet",
    auth: "agent",
    params: X402PaymentParam,
    responses: {
      200: json(AgentX402PaymentOne, "The payment."),
      404: NOT_FOUND("payment (or another agent's)", "agent_x402_payment_not_found"),
    },
  },
  {
    method: "get",
    path: "/console/agents/:agentId/x402/payments",
    operationId: "listAgentX402PaymentsForConsole",
    summary: "An agent's x402 payments",
    description: "Newest first.",
    tag: "Console agents",
    auth: "console",
    params: AgentParam,
    query: X402PaymentsQuery,
    responses: {
      200: json(AgentX402PaymentList, "Payments."),
      400: INVALID,
      404: error("`agent_not_found`.", "agent_not_found"),
    },
  },
];
