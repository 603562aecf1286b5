import type { Client } from "openapi-fetch";
import type { components, paths } from "./schema";

/*
 * A fetch that pays x402 paywalls from an agent's wallet, as the official x402 fetch wrappers do
 * (@x402/fetch's wrapFetchWithPayment): the request is cloned before it is sent, so its body can be
 * sent again; a 402 with x402 terms is handed to POST /agent/x402/payments, and the clone is sent
 * once more with the header the service answers. The agent holds no keys: the service signs.
 */

export type PaymentRequired = components["schemas"]["AgentX402PaymentRequest"]["paymentRequired"];
export type X402Payment = components["schemas"]["AgentX402PaymentMade"];

export interface PayingFetchOptions {
  /** The fetch that reaches the resources (default: the global fetch); the service is reached with the client's own. */
  fetch?: typeof fetch;
  /** Refuse (402 `over_max_amount`) any payment above this many token base units (6 decimals: "10000" is $0.01). */
  maxAmountBaseUnits?: string;
  /** A new Idempotency-Key for each paid request (default: a random UUID). */
  newIdempotencyKey?: () => string;
  /** Told of every payment made, with the resource paid for. */
  onPayment?: (payment: X402Payment["payment"], resource: string) => void;
}

/**
 * The service refused to pay (its policy, the balance, the terms): `status` and `error` as it
 * answered. Over the approval threshold it is 402 `pending_approval`, `body` holding the
 * `approvalId`: once a console user grants it, the same request pays.
 */
export class X402PaymentRefused extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly body: unknown,
  ) {
    super(`agent-pay refused the x402 payment: ${status} ${error}`);
    this.name = "X402PaymentRefused";
  }
}

function base64Json(text: string): unknown {
  try {
    const normalized = text.trim().replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(normalized);
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

const hasAccepts = (value: unknown, version: 1 | 2): value is PaymentRequired =>
  typeof value === "object" &&
  value !== null &&
  (value as { x402Version?: unknown }).x402Version === version &&
  Array.isArray((value as { accepts?: unknown }).accepts);

/**
 * The x402 terms of a 402: version 2's `PAYMENT-REQUIRED` header first, else a version 1 body
 * `{ x402Version: 1, accepts }`; null when it has neither (then it is not paid).
 */
export async function paymentRequiredOf(response: Response): Promise<PaymentRequired | null> {
  const header = response.headers.get("payment-required");
  const v2 = header === null ? undefined : base64Json(header);
  if (hasAccepts(v2, 2)) return v2;
  try {
    const v1: unknown = await response.clone().json();
    return hasAccepts(v1, 1) ? v1 : null;
  } catch {
    return null;
  }
}

/** The refusal's code; a payment held for a human's approval (402 `pendingApproval`, no code) is `pending_approval`. */
const errorOf = (body: unknown): string => {
  if (typeof body !== "object" || body === null) return "unexpected_response";
  if ("pendingApproval" in body && body.pendingApproval === true) return "pending_approval";
  return "error" in body && typeof body.error === "string" ? body.error : "unexpected_response";
};

/**
 * Builds the agent's paying fetch. A 402 without x402 terms, and any other answer, is returned as
 * it is; a request that already carries a payment header is not paid again. The payment is asked
 * for once per request, under one Idempotency-Key: a failed attempt (the service unreachable, or a
 * 5xx) is asked again once with the same key, so it can never pay twice. The paid request is sent
 * once: a 402 again is returned, not paid again. A refusal throws `X402PaymentRefused`.
 */
export function payingFetch(api: Client<paths>, options: PayingFetchOptions = {}) {
  const send = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  const newKey = options.newIdempotencyKey ?? (() => crypto.randomUUID());

  async function pay(resource: string, paymentRequired: PaymentRequired): Promise<X402Payment> {
    const key = newKey();
    const ask = () =>
      api.POST("/agent/x402/payments", {
        params: { header: { "Idempotency-Key": key } },
        body: {
          resource,
          paymentRequired,
          ...(options.maxAmountBaseUnits ? { maxAmountBaseUnits: options.maxAmountBaseUnits } : {}),
        },
      });
    let result: Awaited<ReturnType<typeof ask>>;
    try {
      result = await ask();
      if (result.response.status >= 500) result = await ask();
    } catch {
      result = await ask();
    }
    if (result.response.status !== 201 || result.data === undefined)
      throw new X402PaymentRefused(result.response.status, errorOf(result.error), result.error);
    return result.data;
  }

  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    // Cloned before the first send: a body can be read only once.
    const again = request.clone();
    const response = await send(request);
    if (response.status !== 402) return response;
    if (again.headers.has("payment-signature") || again.headers.has("x-payment")) return response;
    const terms = await paymentRequiredOf(response);
    if (!terms) return response;
    const paid = await pay(request.url, terms);
    options.onPayment?.(paid.payment, request.url);
    again.headers.set(paid.header.name, paid.header.value);
    return send(again);
  };
}
