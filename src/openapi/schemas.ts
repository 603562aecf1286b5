import { z } from "zod";
import { ID_PREFIXES } from "../lib/ids";
import { APPROVAL_STATUSES } from "../approvals/service";
import { EVENT_TYPES } from "../webhooks/outbox";

/**
 * Response bodies, in zod, as the views in each domain's service render them.
 * They are strict (`additionalProperties: false`) on purpose: a field a view
 * adds or drops without the document following fails the contract test
 * (test/openapi/contract.test.ts), and the typed client is generated from them.
 */
export const responseSchemas = z.registry<{ id: string; description?: string }>();

const named = <T extends z.ZodType>(id: string, schema: T, description?: string): T => {
  responseSchemas.add(schema, description === undefined ? { id } : { id, description });
  return schema;
};

const prefixed = (kind: keyof typeof ID_PREFIXES) => z.string().regex(new RegExp(`^${ID_PREFIXES[kind]}`));
/** ISO 8601 in UTC, as `Date.prototype.toISOString` writes it. */
const Timestamp = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
  .meta({ format: "date-time" });
const Cents = z.number().int().nonnegative();
const Usd = z.literal("USD");
const EvmAddress = z.string().regex(/^0x[a-fA-F0-9]{40}$/);

// ---------------------------------------------------------------------------
// Errors: `{ error }`, plus the few extras `ApiError` carries.

export const ErrorBody = named(
  "Error",
  z.strictObject({ error: z.string() }),
  "Every failure: `{ error: <string> }` (interface section 7).",
);

export const InvalidRequest = named(
  "InvalidRequest",
  z.strictObject({
    error: z.literal("invalid_request"),
    issues: z.array(z.strictObject({ path: z.string(), code: z.string(), message: z.string() })),
  }),
  "An invalid body, query or header: where and what, never the rejected value (operations section 5).",
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

// ---------------------------------------------------------------------------
// Merchants and KYT

export const KytResult = named("KytResult", z.strictObject({ verdict: z.enum(["pass", "block"]), reason: z.string() }));

export const MerchantRegistered = named(
  "MerchantRegistered",
  z.strictObject({
    merchantId: prefixed("merchant"),
    apiKey: prefixed("merchantKey").describe("Shown exactly once; only its SHA-256 hash is stored."),
  }),
);

export const Merchant = named(
  "Merchant",
  z.strictObject({
    id: prefixed("merchant"),
    name: z.string(),
    balanceMinor: Cents,
    currency: Usd,
    payoutAddress: EvmAddress.nullable(),
  }),
);

export const MerchantMe = named("MerchantMe", z.strictObject({ merchant: Merchant }));

export const ConsoleMerchant = named(
  "ConsoleMerchant",
  z.strictObject({
    id: prefixed("merchant"),
    name: z.string(),
    category: z.string().nullable(),
    balanceMinor: Cents,
    currency: Usd,
    payoutAddress: EvmAddress.nullable(),
    createdAt: Timestamp,
  }),
);

export const ConsoleMerchantList = named(
  "ConsoleMerchantList",
  z.strictObject({ merchants: z.array(ConsoleMerchant) }),
);

export const PayoutAddressSet = named("PayoutAddressSet", z.strictObject({ ok: z.literal(true), kyt: KytResult }));

export const PayoutAddressFlagged = named(
  "PayoutAddressFlagged",
  z.strictObject({ error: z.literal("payout_address_flagged"), verdict: z.enum(["block"]), reason: z.string() }),
);

export const BlocklistEntry = named(
  "BlocklistEntry",
  z.strictObject({ address: EvmAddress, reason: z.string(), addedBy: z.string(), createdAt: Timestamp }),
);
export const BlocklistList = named("BlocklistList", z.strictObject({ entries: z.array(BlocklistEntry) }));
export const BlocklistAdded = named("BlocklistAdded", z.strictObject({ entry: BlocklistEntry }));

// ---------------------------------------------------------------------------
// Charges

export const Charge = named(
  "Charge",
  z.strictObject({
    chargeId: prefixed("charge"),
    merchantId: prefixed("merchant"),
    agentId: prefixed("agent")
      .nullable()
      .describe("Null while unpaid, and for an x402 payment (the payer is an address)."),
    amountMinor: z.number().int().positive(),
    currency: Usd,
    description: z.string().nullable(),
    externalId: z.string().nullable(),
    status: z.enum(["pending", "paid"]),
    method: z.enum(["ledger", "x402", "paylink"]).nullable(),
    reference: z
      .string()
      .nullable()
      .describe("`PAY_...` for ledger and PayLink payments; the transaction hash for x402."),
    createdAt: Timestamp,
    paidAt: Timestamp.nullable(),
  }),
);

export const ChargeList = named("ChargeList", z.strictObject({ charges: z.array(Charge) }));

export const ChargePaid = named(
  "ChargePaid",
  z.strictObject({ paid: z.literal(true), charge: Charge, merchantBalanceMinor: Cents }),
);

export const PendingApproval = named(
  "PendingApproval",
  z.strictObject({
    pendingApproval: z.literal(true),
    reason: z.string(),
    approvalId: prefixed("approval"),
    expiresAt: Timestamp,
    charge: Charge,
  }),
  "The payment is held for a human (status 402): nothing was charged. Paying again while it is pending returns the same approval.",
);

// ---------------------------------------------------------------------------
// Checkout links

const checkoutLinkFields = {
  checkoutLinkId: prefixed("checkoutLink"),
  checkoutToken: prefixed("checkoutToken"),
  checkoutUrl: z.string().regex(/^\/checkout\//),
  amountMinor: z.number().int().positive(),
  currency: Usd,
  description: z.string(),
  visits: Cents,
  paymentsCount: Cents,
  totalPaidMinor: Cents,
};

export const CheckoutLinkCreated = named("CheckoutLinkCreated", z.strictObject(checkoutLinkFields));

export const CheckoutLink = named(
  "CheckoutLink",
  z.strictObject({ ...checkoutLinkFields, active: z.boolean(), createdAt: Timestamp }),
  "A checkout link in the merchant's list (also the PATCH response).",
);

export const CheckoutLinkList = named(
  "CheckoutLinkList",
  z.strictObject({ links: z.array(CheckoutLink), total: Cents }),
);

export const CheckoutLinkPublic = named(
  "CheckoutLinkPublic",
  z.strictObject({
    checkoutLinkId: prefixed("checkoutLink"),
    amountMinor: z.number().int().positive(),
    currency: Usd,
    description: z.string(),
    merchantName: z.string(),
    active: z.boolean(),
    status: z.literal("active"),
    visits: Cents,
    paymentsCount: Cents,
    totalPaidMinor: Cents,
  }),
);

export const CheckoutPaid = named("CheckoutPaid", z.strictObject({ paid: z.literal(true), charge: Charge }));

// ---------------------------------------------------------------------------
// PayLinks

const paylinkFields = {
  paylinkId: prefixed("paylink"),
  code: prefixed("paylinkCode"),
  business: z.string().nullable().describe("The merchant's name in the public view; null in the creation response."),
  label: z.string().nullable(),
  budgetMinor: z.number().int().positive(),
  perChargeMinor: z.number().int().positive().nullable(),
  maxUses: z.number().int().positive().nullable(),
  uses: Cents,
  remainingMinor: Cents,
  expiresAt: Timestamp.nullable(),
  status: z.enum(["active", "expired"]),
};

export const PaylinkPublic = named("PaylinkPublic", z.strictObject(paylinkFields));
export const PaylinkCreated = named(
  "PaylinkCreated",
  z.strictObject({ ...paylinkFields, acceptUrl: z.string().regex(/^\/pl\/.+\/accept$/) }),
);
export const PaylinkAccepted = named(
  "PaylinkAccepted",
  z.strictObject({ grantId: prefixed("grant"), paylink: PaylinkPublic }),
);

export const PaylinkDrawn = named(
  "PaylinkDrawn",
  z.strictObject({
    paid: z.literal(true),
    charge: z.strictObject({
      chargeId: prefixed("charge"),
      status: z.literal("paid"),
      method: z.literal("paylink"),
      reference: prefixed("payment"),
    }),
    spentMinor: Cents,
    remainingMinor: Cents,
    exhausted: z.boolean(),
  }),
);

// ---------------------------------------------------------------------------
// Agents and approvals

export const Policy = named(
  "Policy",
  z.strictObject({
    maxPerTransactionUsdCents: z.number().int().positive().nullable(),
    dailyLimitUsdCents: z.number().int().positive().nullable(),
    allowedCategories: z.array(z.string()).nullable(),
    approvalThresholdUsdCents: z.number().int().nonnegative().nullable(),
  }),
  "The stored policy: every field present, null meaning no limit.",
);

export const Agent = named(
  "Agent",
  z.strictObject({
    agentId: prefixed("agent"),
    name: z.string(),
    balanceMinor: Cents,
    currency: Usd,
    policy: Policy,
    depositAddress: EvmAddress.nullable(),
    frozen: z.boolean(),
    frozenReason: z.string().nullable().describe("The reason given with the freeze, if any; null when not frozen."),
    createdAt: Timestamp,
  }),
);

const PreviousKeyExpiresAt = Timestamp.describe(
  "Until then the key this one replaces still works (now, for a grace of 0); after it, 401.",
);
export const AgentKeyRolled = named(
  "AgentKeyRolled",
  z.strictObject({
    agentId: prefixed("agent"),
    apiKey: prefixed("agentKey").describe("Shown exactly once."),
    previousKeyExpiresAt: PreviousKeyExpiresAt,
  }),
);
export const MerchantKeyRolled = named(
  "MerchantKeyRolled",
  z.strictObject({
    merchantId: prefixed("merchant"),
    apiKey: prefixed("merchantKey").describe("Shown exactly once."),
    previousKeyExpiresAt: PreviousKeyExpiresAt,
  }),
);
export const AgentFrozen = named("AgentFrozen", z.strictObject({ agentId: prefixed("agent"), frozen: z.boolean() }));

export const AgentCreated = named(
  "AgentCreated",
  z.strictObject({
    agentId: prefixed("agent"),
    apiKey: prefixed("agentKey").describe("Shown exactly once."),
    policy: Policy,
    depositAddress: EvmAddress.nullable(),
  }),
);

export const AgentList = named("AgentList", z.strictObject({ agents: z.array(Agent) }));
export const PolicySet = named("PolicySet", z.strictObject({ policy: Policy }));
export const CreditApplied = named("CreditApplied", z.strictObject({ balanceMinor: Cents }));

export const Balance = named(
  "Balance",
  z.strictObject({
    agentId: prefixed("agent"),
    balanceMinor: Cents,
    currency: Usd,
    depositAddress: EvmAddress.nullable(),
    frozen: z
      .boolean()
      .describe(
        "True while an operator has frozen the wallet: every payment is refused (403 `agent_frozen`); reads keep working.",
      ),
  }),
);

export const Approval = named(
  "Approval",
  z.strictObject({
    approvalId: prefixed("approval"),
    chargeId: prefixed("charge"),
    agentId: prefixed("agent"),
    merchantId: prefixed("merchant"),
    amountMinor: z.number().int().positive(),
    reason: z.string(),
    status: z.enum(APPROVAL_STATUSES),
    expiresAt: Timestamp,
    createdAt: Timestamp,
  }),
);

export const ApprovalList = named("ApprovalList", z.strictObject({ approvals: z.array(Approval) }));

export const ApprovalGranted = named(
  "ApprovalGranted",
  z.strictObject({
    approval: z.strictObject({ approvalId: prefixed("approval"), status: z.literal("granted") }),
    charge: Charge,
  }),
);

export const ApprovalRejected = named(
  "ApprovalRejected",
  z.strictObject({ approval: z.strictObject({ approvalId: prefixed("approval"), status: z.literal("rejected") }) }),
);

// ---------------------------------------------------------------------------
// Audit chain

const Hash = z.string().regex(/^[0-9a-f]{64}$/);

export const AuditEvent = named(
  "AuditEvent",
  z.strictObject({
    seq: z.number().int().positive(),
    type: z.string(),
    reference: z.string().nullable(),
    chargeId: z.string().nullable(),
    agentId: z.string().nullable(),
    merchantId: z.string().nullable(),
    amountMinor: z.number().int(),
    currency: z.string(),
    data: z.record(z.string(), z.unknown()),
    createdAt: Timestamp,
    prevHash: Hash,
    hash: Hash,
  }),
);

export const AuditPage = named(
  "AuditPage",
  z.strictObject({ events: z.array(AuditEvent), nextAfterSeq: z.number().int().positive().nullable() }),
);

export const ChainVerdict = named(
  "ChainVerdict",
  z.union([
    z.strictObject({ ok: z.literal(true), rows: Cents, headSeq: Cents, headHash: Hash }),
    z.strictObject({
      ok: z.literal(false),
      rows: Cents,
      brokenSeq: z.number().int(),
      problem: z.enum(["seq_gap", "prev_hash_mismatch", "hash_mismatch"]),
    }),
  ]),
);

// ---------------------------------------------------------------------------
// Webhooks

const EventType = z.enum(EVENT_TYPES);

export const WebhookEndpointCreated = named(
  "WebhookEndpointCreated",
  z.strictObject({
    id: prefixed("webhookEndpoint"),
    url: z.string(),
    events: z.array(EventType).describe("Empty means every event kind."),
    merchantId: prefixed("merchant").nullable(),
    secret: prefixed("webhookSecret").describe("Shown once: the HMAC-SHA256 key of the X-Service-Signature header."),
  }),
);

export const WebhookEndpoint = named(
  "WebhookEndpoint",
  z.strictObject({
    id: prefixed("webhookEndpoint"),
    url: z.string(),
    events: z.array(EventType),
    merchantId: prefixed("merchant").nullable(),
    createdAt: Timestamp,
  }),
);

export const WebhookEndpointList = named(
  "WebhookEndpointList",
  z.strictObject({ endpoints: z.array(WebhookEndpoint) }),
);
export const WebhookEndpointDeleted = named(
  "WebhookEndpointDeleted",
  z.strictObject({ id: prefixed("webhookEndpoint"), deleted: z.literal(true) }),
);

export const WebhookSecretRotated = named(
  "WebhookSecretRotated",
  z.strictObject({
    id: prefixed("webhookEndpoint"),
    secret: prefixed("webhookSecret"),
    previousSecretExpiresAt: Timestamp.nullable(),
  }),
);

export const WebhookDelivery = named(
  "WebhookDelivery",
  z.strictObject({
    id: z.string(),
    eventId: prefixed("webhookEvent"),
    type: EventType,
    status: z.enum(["pending", "delivered", "failed"]),
    attempts: Cents,
    lastStatusCode: z.number().int().nullable(),
    lastError: z.string().nullable(),
    nextAttemptAt: Timestamp.nullable(),
    createdAt: Timestamp,
    deliveredAt: Timestamp.nullable(),
  }),
);

export const WebhookDeliveryList = named(
  "WebhookDeliveryList",
  z.strictObject({ deliveries: z.array(WebhookDelivery) }),
);
export const RedeliveryQueued = named(
  "RedeliveryQueued",
  z.strictObject({ id: z.string(), status: z.literal("pending") }),
);

/** The body a receiver gets (interface section 6); documented for the client's `verifyWebhook`. */
export const WebhookEvent = named(
  "WebhookEvent",
  z.strictObject({
    id: prefixed("webhookEvent"),
    type: EventType,
    createdAt: Timestamp,
    data: z.record(z.string(), z.unknown()),
  }),
  'The envelope POSTed to a webhook endpoint, signed in X-Service-Signature (`t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`).',
);

// ---------------------------------------------------------------------------
// x402

export const X402Requirements = named(
  "X402Requirements",
  z.strictObject({
    scheme: z.literal("exact"),
    network: z.string(),
    maxAmountRequired: z
      .string()
      .regex(/^\d+$/)
      .describe("Token base units: amountMinor x 10,000 (USDC has 6 decimals)."),
    resource: z.string().describe("The full URL of this path."),
    description: z.string(),
    mimeType: z.string(),
    payTo: EvmAddress.describe(
      "The receiving address of this one charge or checkout link: an authorization (which signs its `to`) made for it pays nothing else.",
    ),
    maxTimeoutSeconds: z.number().int().positive(),
    asset: EvmAddress,
    extra: z.strictObject({ name: z.string(), version: z.string() }),
  }),
);

export const X402PaymentRequired = named(
  "X402PaymentRequired",
  z.strictObject({
    x402Version: z.literal(1),
    error: z.string().describe("`X-PAYMENT header is required`, `Pago inválido` or `Liquidación fallida`."),
    accepts: z.array(X402Requirements).min(1),
    invalidReason: z.string().optional(),
    errorReason: z.string().optional(),
  }),
);

export const X402Settled = named(
  "X402Settled",
  z.strictObject({
    chargeId: prefixed("charge"),
    status: z.literal("paid"),
    settlement: z.strictObject({ success: z.literal(true), transaction: z.string().regex(/^0x[0-9a-fA-F]{64}$/) }),
  }),
);

export const X402SettlementPending = named(
  "X402SettlementPending",
  z.strictObject({
    chargeId: prefixed("charge"),
    status: z.literal("pending"),
    settlement: z.strictObject({
      success: z.literal(false),
      pending: z.literal(true),
      transaction: z.string().nullable(),
    }),
  }),
  "A settlement whose outcome is not known yet (202, Retry-After): the client asks again; it never gets a fresh 402 meanwhile.",
);

const BaseUnits = z.string().regex(/^\d+$/).describe("Token base units as a decimal string (they can pass 2^53).");

export const ReceivingAddressReport = named(
  "ReceivingAddressReport",
  z.strictObject({
    asOfBlock: z
      .number()
      .int()
      .nonnegative()
      .nullable()
      .describe("The block the balances were read at; null when the chain could not be read."),
    totals: z.strictObject({
      addresses: z.number().int().nonnegative(),
      payments: z.number().int().nonnegative(),
      receivedBaseUnits: BaseUnits,
    }),
    addresses: z.array(
      z.strictObject({
        address: EvmAddress,
        ownerKind: z.enum(["charge", "checkout_link"]),
        ownerId: z.string(),
        merchantId: prefixed("merchant"),
        payments: z.number().int().positive(),
        receivedBaseUnits: BaseUnits,
        balanceBaseUnits: BaseUnits.nullable(),
        lastPaymentAt: Timestamp,
      }),
    ),
  }),
  "What x402 payments left on the charges' and checkout links' receiving addresses: settled to each per the ledger, held by each per the chain.",
);

// ---------------------------------------------------------------------------
// Console sign-in and users

export const EmailCodeSent = named("EmailCodeSent", z.strictObject({ sent: z.literal(true) }));
export const ConsoleSession = named(
  "ConsoleSession",
  z.strictObject({ token: z.string().describe("A console session JWT (HS256, aud `console`)."), expiresAt: Timestamp }),
);
export const SignedOut = named("SignedOut", z.strictObject({ signedOut: z.literal(true) }));

export const ConsoleUser = named(
  "ConsoleUser",
  z.strictObject({
    email: z.string(),
    source: z.enum(["configured", "console"]),
    addedBy: z.string().nullable(),
    createdAt: Timestamp.nullable(),
  }),
);
export const ConsoleUserList = named("ConsoleUserList", z.strictObject({ users: z.array(ConsoleUser) }));
export const ConsoleUserAdded = named(
  "ConsoleUserAdded",
  z.strictObject({ user: z.strictObject({ email: z.string(), addedBy: z.string(), createdAt: Timestamp }) }),
);

// ---------------------------------------------------------------------------
// MCP (JSON-RPC 2.0 over streamable HTTP, JSON answers)

const JsonRpcId = z.union([z.string(), z.number().int()]);

const JsonRpcResult = z.strictObject({
  jsonrpc: z.literal("2.0"),
  id: JsonRpcId,
  result: z.record(z.string(), z.unknown()),
});
const JsonRpcFailure = z.strictObject({
  jsonrpc: z.literal("2.0"),
  id: JsonRpcId.nullable(),
  error: z.strictObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
});

export const JsonRpcResponse = named(
  "JsonRpcResponse",
  z.union([JsonRpcResult, JsonRpcFailure, z.array(z.union([JsonRpcResult, JsonRpcFailure]))]),
  "A JSON-RPC 2.0 answer (or a batch of them); a tool's failure is a result with `isError: true`.",
);

export const JsonRpcTransportError = named(
  "JsonRpcTransportError",
  JsonRpcFailure,
  "The transport refused the request (not JSON-RPC, wrong Accept or Content-Type); `id` is null.",
);
