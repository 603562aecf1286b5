import { z } from "zod";
import { EvmAddress, named, Timestamp } from "../lib/api-shapes";

/** Response bodies of the service as the x402 facilitator of merchants' own routes. */

export const X402FacilitatorTerms = named(
  "X402FacilitatorTerms",
  z.strictObject({
    facilitatorUrl: z
      .string()
      .describe(
        "The facilitator's base URL: the official middlewares call `/supported`, `/verify` and `/settle` below it.",
      ),
    payTo: EvmAddress.describe(
      "This merchant's own receiving address: payments to it, settled here, are the merchant's charges.",
    ),
    network: z.string().describe("The chain's CAIP-2 id (`eip155:84532`); version 1 names it (`base-sepolia`)."),
    asset: EvmAddress.describe("The stablecoin the service settles."),
    extra: z.strictObject({ name: z.string(), version: z.string() }).describe("The token's EIP-712 domain."),
  }),
  "What a merchant's x402 middleware needs to use the service as its facilitator.",
);

export const X402Supported = named(
  "X402Supported",
  z.strictObject({
    kinds: z.array(
      z.strictObject({
        x402Version: z.union([z.literal(1), z.literal(2)]),
        scheme: z.literal("exact"),
        network: z.string(),
      }),
    ),
    extensions: z.array(z.string()),
    signers: z.record(z.string(), z.array(EvmAddress)),
  }),
  "The x402 `supported` answer: `exact` on the service's chain, in versions 1 and 2.",
);

export const X402VerifyAnswer = named(
  "X402VerifyAnswer",
  z.strictObject({
    isValid: z.boolean(),
    invalidReason: z
      .string()
      .optional()
      .describe("A reason code of the protocol's packages (`@x402/evm` for version 2, `x402` 1.x for version 1)."),
    payer: z.string().optional().describe("The authorization's `from`."),
  }),
);

export const X402SettleAnswer = named(
  "X402SettleAnswer",
  z.strictObject({
    success: z.boolean(),
    errorReason: z
      .string()
      .optional()
      .describe(
        "A reason code of the protocol's packages; `settlement_pending` (version 2) when the outcome is not known yet: ask again with the same payload.",
      ),
    transaction: z.string().describe("The settling transaction's hash; empty when there is none."),
    network: z.string(),
    payer: z.string().optional(),
  }),
);

const Accepts = z
  .array(z.record(z.string(), z.unknown()))
  .describe("The payment requirements of the last settled payment.");

export const X402DiscoveryList = named(
  "X402DiscoveryList",
  z.strictObject({
    x402Version: z.literal(2),
    items: z.array(
      z.strictObject({
        resource: z.string(),
        type: z.string(),
        x402Version: z.number().int(),
        accepts: Accepts,
        lastUpdated: Timestamp,
        description: z.string().optional(),
        mimeType: z.string().optional(),
        extensions: z.record(z.string(), z.unknown()).optional(),
      }),
    ),
    pagination: z.strictObject({
      limit: z.number().int(),
      offset: z.number().int(),
      total: z.number().int(),
    }),
  }),
  "The x402 discovery list: resources that declared the `bazaar` extension, listed once a payment for them settled here, most recently listed first.",
);

export const X402MerchantResources = named(
  "X402MerchantResources",
  z.strictObject({
    resources: z.array(
      z.strictObject({
        resource: z.string(),
        type: z.string(),
        x402Version: z.number().int(),
        description: z.string().nullable(),
        mimeType: z.string().nullable(),
        accepts: Accepts,
        listedAt: Timestamp,
        lastPaidAt: Timestamp,
      }),
    ),
  }),
  "The merchant's own listed resources, most recently paid first.",
);
