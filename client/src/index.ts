import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema";
import { type VerifyResult, verifyWebhook } from "./webhooks";
import { type PayingFetchOptions, payingFetch } from "./x402-fetch";

/**
 * A typed client for agent-pay, generated from its OpenAPI document
 * (client/openapi.json, served at GET /openapi.json), with the helpers an
 * agent's author reaches for first.
 */

export type { components, paths } from "./schema";
export type Schemas = components["schemas"];
export type Charge = Schemas["Charge"];
export type Balance = Schemas["Balance"];
export type PaylinkAccepted = Schemas["PaylinkAccepted"];
export type WebhookEvent = Schemas["WebhookEvent"];

/** The raw client: every operation of the document, typed by path and method. */
export type AgentPayClient = Client<paths>;

export interface ClientOptions {
  /** The service, e.g. http://127.0.0.1:8787 under `npm run dev`. */
  baseUrl: string;
  /** A merchant key (`sk_mch_...`), an agent key (`svc_sk_...`) or a console session token. */
  apiKey?: string;
  /** A fetch to use instead of the global one (tests, proxies). */
  fetch?: typeof fetch;
}

/** A failure the caller has to fix (a wrong key, a bad request, the service down), with the service's `error` string. */
export class AgentPayError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly body: unknown,
  ) {
    super(`agent-pay answered ${status}: ${error}`);
    this.name = "AgentPayError";
  }
}

const errorOf = (body: unknown): string =>
  typeof body === "object" && body !== null && "error" in body && typeof body.error === "string"
    ? body.error
    : "unexpected_response";

/** The typed client for any credential: `client.POST("/merchant/charges", { body: { amountUsdCents: 1500 } })`. */
export function createAgentPayClient(options: ClientOptions): AgentPayClient {
  return createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    ...(options.apiKey ? { headers: { authorization: `Bearer ${options.apiKey}` } } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** The data of a successful call, or an AgentPayError with the service's error string. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined || !result.response.ok)
    throw new AgentPayError(result.response.status, errorOf(result.error), result.error);
  return result.data;
}

/**
 * What a payment came to. A payment held for a human is not a failure: nothing
 * was charged, and the charge is paid once a console user grants the approval
 * (`waitForCharge` sees it). `refused` is the policy, the balance or the state
 * of the charge saying no (402 or 409), with the service's reason.
 */
export type PaymentResult<Paid> =
  | ({ status: "paid" } & Paid)
  | { status: "pending_approval"; approvalId: string; reason: string; expiresAt: string; charge: Charge }
  | { status: "refused"; httpStatus: 402 | 409; error: string };

export interface PayOptions {
  /** Makes a retry of this payment safe: the same key replays the first answer instead of paying twice. */
  idempotencyKey?: string;
}

type Outcome = { data?: unknown; error?: unknown; response: Response };

function paymentResult<Paid>(result: Outcome, paid: (data: unknown) => Paid): PaymentResult<Paid> {
  const { response, error } = result;
  if (response.ok && result.data !== undefined) return { status: "paid", ...paid(result.data) };
  if (response.status === 402 && typeof error === "object" && error !== null && "pendingApproval" in error) {
    const held = error as Schemas["PendingApproval"];
    return {
      status: "pending_approval",
      approvalId: held.approvalId,
      reason: held.reason,
      expiresAt: held.expiresAt,
      charge: held.charge,
    };
  }
  if (response.status === 402 || response.status === 409)
    return { status: "refused", httpStatus: response.status, error: errorOf(error) };
  throw new AgentPayError(response.status, errorOf(error), error);
}

const idempotency = (options: PayOptions) =>
  options.idempotencyKey ? { "Idempotency-Key": options.idempotencyKey } : {};

/** The helpers for an agent, with its `svc_sk_...` key. */
export function agentPay(options: ClientOptions & { apiKey: string; x402?: PayingFetchOptions }) {
  const api = createAgentPayClient(options);
  return {
    /** The raw typed client, with the agent's key. */
    api,

    /**
     * A `fetch` that pays x402 paywalls from the agent's wallet: on a 402 with x402 terms it asks
     * POST /agent/x402/payments (under a new Idempotency-Key) and sends the request once more with
     * the header (./x402-fetch.ts). A refusal throws `X402PaymentRefused`.
     */
    fetch: payingFetch(api, options.x402),

    /** Pays a charge from the agent's wallet, under its policy. */
    async payCharge(chargeId: string, pay: PayOptions = {}): Promise<PaymentResult<Schemas["ChargePaid"]>> {
      const result = await api.POST("/charges/{chargeId}/pay", {
        params: { path: { chargeId }, header: idempotency(pay) },
      });
      return paymentResult(result, (data) => data as Schemas["ChargePaid"]);
    },

    /** Pays a checkout link: a new charge of the link's amount, paid from the wallet. */
    async payCheckoutLink(
      checkoutToken: string,
      pay: PayOptions = {},
    ): Promise<PaymentResult<Schemas["CheckoutPaid"]>> {
      const result = await api.POST("/checkout/{token}/pay", {
        params: { path: { token: checkoutToken }, header: idempotency(pay) },
      });
      return paymentResult(result, (data) => data as Schemas["CheckoutPaid"]);
    },

    /** Accepts a PayLink (idempotent): the merchant may then draw on it up to its budget. */
    async acceptPayLink(code: string): Promise<PaylinkAccepted> {
      return unwrap(await api.POST("/pl/{code}/accept", { params: { path: { code } } }));
    },

    /** The agent's balance in cents, and its on-chain deposit address. */
    async getBalance(): Promise<Balance> {
      return unwrap(await api.GET("/balance"));
    },

    /**
     * Waits for a charge to be paid: after `pending_approval`, a console user's
     * grant pays it. Resolves with the paid charge; rejects after `timeoutMs`.
     */
    async waitForCharge(chargeId: string, wait: { intervalMs?: number; timeoutMs?: number } = {}): Promise<Charge> {
      const deadline = Date.now() + (wait.timeoutMs ?? 60_000);
      for (;;) {
        const charge = unwrap(await api.GET("/charges/{chargeId}", { params: { path: { chargeId } } }));
        if (charge.status === "paid") return charge;
        if (Date.now() > deadline) throw new AgentPayError(408, "charge_still_pending", charge);
        await new Promise((resolve) => setTimeout(resolve, wait.intervalMs ?? 1000));
      }
    },
  };
}

export {
  type ChargeReceipt,
  type PayoutReceipt,
  RECEIPT_TYP,
  type ReceiptKeys,
  type ReceiptPayload,
  type ReceiptVerdict,
  type RefundReceipt,
  verifyReceipt,
} from "./receipts";
export { type VerifyResult, verifyWebhook } from "./webhooks";
export {
  type PayingFetchOptions,
  type PaymentRequired,
  payingFetch,
  paymentRequiredOf,
  type X402Payment,
  X402PaymentRefused,
} from "./x402-fetch";

/** `verifyWebhook`, then the parsed event (deduplicate by `event.id`). */
export async function parseWebhook(input: {
  secret: string;
  header: string | null | undefined;
  rawBody: string;
  toleranceSeconds?: number;
}): Promise<{ ok: true; event: WebhookEvent } | { ok: false; reason: Extract<VerifyResult, { ok: false }>["reason"] }> {
  const verdict = await verifyWebhook(input);
  if (!verdict.ok) return verdict;
  return { ok: true, event: JSON.parse(input.rawBody) as WebhookEvent };
}
