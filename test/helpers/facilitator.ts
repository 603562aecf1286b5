import type { Hex } from "viem";
import { expect } from "vitest";
import { api } from "./api";
import { type AuthorizationOverrides, chain, signAuthorization } from "./x402";

/*
 * Requests to the service as a merchant's x402 facilitator, built as the official facilitator
 * clients send them: `{ x402Version, paymentPayload, paymentRequirements }`, the payload signed as
 * the official x402 clients sign it, for the merchant's own `payTo` unless told otherwise.
 */

export interface FacilitatorTerms {
  facilitatorUrl: string;
  payTo: Hex;
  network: string;
  asset: Hex;
  extra: { name: string; version: string };
}

export async function facilitatorTerms(merchantKey: string): Promise<FacilitatorTerms> {
  const res = await api("GET", "/merchant/x402/facilitator", { token: merchantKey });
  expect(res.status, res.text).toBe(200);
  return res.body as FacilitatorTerms;
}

export interface Ask {
  value: bigint;
  resource: string;
  description?: string;
  /** The requirements' payTo, when not the merchant's own. */
  payTo?: Hex;
  /** Version 1: the requirements' outputSchema (discovery metadata). */
  outputSchema?: Record<string, unknown>;
  /** Version 2: the payload's extensions (discovery metadata). */
  extensions?: Record<string, unknown>;
  authorization?: AuthorizationOverrides;
}

export async function v1Request(payer: number | Hex, terms: FacilitatorTerms, ask: Ask) {
  const payTo = ask.payTo ?? terms.payTo;
  const paymentRequirements = {
    scheme: "exact",
    network: "base-sepolia",
    maxAmountRequired: ask.value.toString(),
    resource: ask.resource,
    description: ask.description ?? "a paid call",
    mimeType: "application/json",
    ...(ask.outputSchema ? { outputSchema: ask.outputSchema } : {}),
    payTo,
    maxTimeoutSeconds: 300,
    asset: terms.asset,
    extra: terms.extra,
  };
  const payload = await signAuthorization(payer, ask.value, { to: payTo, ...ask.authorization });
  return {
    x402Version: 1,
    paymentPayload: { x402Version: 1, scheme: "exact", network: "base-sepolia", payload },
    paymentRequirements,
  };
}

export async function v2Request(payer: number | Hex, terms: FacilitatorTerms, ask: Ask) {
  const payTo = ask.payTo ?? terms.payTo;
  const paymentRequirements = {
    scheme: "exact",
    network: `eip155:${chain().chainId}`,
    amount: ask.value.toString(),
    asset: terms.asset,
    payTo,
    maxTimeoutSeconds: 300,
    extra: terms.extra,
  };
  const payload = await signAuthorization(payer, ask.value, { to: payTo, ...ask.authorization });
  return {
    x402Version: 2,
    paymentPayload: {
      x402Version: 2,
      resource: { url: ask.resource, description: ask.description ?? "a paid call", mimeType: "application/json" },
      accepted: paymentRequirements,
      payload,
      ...(ask.extensions ? { extensions: ask.extensions } : {}),
    },
    paymentRequirements,
  };
}

export const verify = (merchantKey: string, body: unknown) =>
  api("POST", "/x402/facilitator/verify", { token: merchantKey, body });
export const settle = (merchantKey: string, body: unknown) =>
  api("POST", "/x402/facilitator/settle", { token: merchantKey, body });

/** The merchant's charges, newest first. */
export async function chargesOf(merchantKey: string) {
  const res = await api("GET", "/merchant/charges?limit=100", { token: merchantKey });
  expect(res.status, res.text).toBe(200);
  return res.body.charges as Record<string, unknown>[];
}
