import { getAddress } from "viem";
import type { X402Settings } from "../config/env";
import { centsToUsdcUnits } from "../lib/money";

/** The v1 requirements object: every field the official v1 clients' strict schema demands, and no `outputSchema: null`. */
export interface RequirementsV1 {
  scheme: "exact";
  network: string;
  maxAmountRequired: string;
  resource: string;
  description: string;
  mimeType: string;
  payTo: string;
  maxTimeoutSeconds: number;
  asset: string;
  extra: { name: string; version: string };
}

export interface RequirementsV2 {
  scheme: "exact";
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string };
}

export interface Terms {
  v1: RequirementsV1;
  v2: RequirementsV2;
  /** The one address an authorization for these terms may pay (checksummed). */
  payTo: `0x${string}`;
  /** The v2 PaymentRequired object, sent base64 in the PAYMENT-REQUIRED header. */
  paymentRequired: {
    x402Version: 2;
    error: string;
    resource: { url: string; description: string; mimeType: string };
    accepts: RequirementsV2[];
    extensions: typeof EXTENSIONS;
  };
  value: bigint;
}

/**
 * The v2 extensions the service honours, declared in every PAYMENT-REQUIRED. `payment-identifier`
 * (optional): a payment carrying an id this payer already paid with gets that payment's outcome,
 * and nothing is settled or charged again. The schema is the extension's published one.
 */
const EXTENSIONS = {
  "payment-identifier": {
    info: { required: false },
    schema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: {
        required: { type: "boolean" },
        id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" },
      },
      required: ["required"],
    },
  },
} as const;

export const caip2 = (chainId: number) => `eip155:${chainId}`;

/**
 * The terms for paying `amountMinor` cents at `resource` to `payTo`, the receiving address of that
 * one charge or link. Deterministic: the same charge or link yields byte-identical terms in the
 * 402 and in the check of the paid retry.
 */
export function termsFor(
  x: X402Settings,
  resource: string,
  amountMinor: number,
  description: string,
  receivingAddress: `0x${string}`,
): Terms {
  return termsForValue(x, resource, centsToUsdcUnits(amountMinor), description, receivingAddress);
}

/** The terms for paying `value` token base units: a merchant's own route names its price in them. */
export function termsForValue(
  x: X402Settings,
  resource: string,
  value: bigint,
  description: string,
  receivingAddress: `0x${string}`,
): Terms {
  const payTo = getAddress(receivingAddress);
  const extra = { name: x.assetName, version: x.assetVersion };
  const mimeType = "application/json";
  const v1: RequirementsV1 = {
    scheme: "exact",
    network: x.network,
    maxAmountRequired: value.toString(),
    resource,
    description,
    mimeType,
    payTo,
    maxTimeoutSeconds: x.maxTimeoutSeconds,
    asset: x.asset,
    extra,
  };
  const v2: RequirementsV2 = {
    scheme: "exact",
    network: caip2(x.chainId),
    amount: value.toString(),
    asset: x.asset,
    payTo,
    maxTimeoutSeconds: x.maxTimeoutSeconds,
    extra,
  };
  return {
    v1,
    v2,
    payTo,
    value,
    paymentRequired: {
      x402Version: 2,
      error: "Payment required",
      resource: { url: resource, description, mimeType },
      accepts: [v2],
      extensions: EXTENSIONS,
    },
  };
}

/** UTF-8 safe base64 of JSON (header values). */
export function base64Json(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value));
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}
