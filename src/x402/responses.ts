import { z } from "zod";
import { EvmAddress, named, prefixed, Timestamp } from "../lib/api-shapes";

/** Response bodies: x402 payments and the receiving addresses they leave tokens on. */

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

const SettlementId = prefixed("x402Payment").describe(
  "The settlement's id: GET /x402/settlements/{settlementId} answers its state.",
);

export const X402Settled = named(
  "X402Settled",
  z.strictObject({
    chargeId: prefixed("charge"),
    status: z.literal("paid"),
    settlement: z.strictObject({
      success: z.literal(true),
      transaction: z.string().regex(/^0x[0-9a-fA-F]{64}$/),
      settlementId: SettlementId,
    }),
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
      settlementId: SettlementId,
    }),
  }),
  "A settlement whose outcome is not known yet (202, Retry-After, and Location naming /x402/settlements/{settlementId}): the client asks that resource, or sends the same payment again; it never gets a fresh 402 meanwhile.",
);

export const X402Settlement = named(
  "X402Settlement",
  z.strictObject({
    settlementId: SettlementId,
    status: z
      .enum(["pending", "settled", "failed"])
      .describe(
        "`pending` while the outcome is not known; `settled` once the chain moved the money and the charge is paid; `failed` when it never will.",
      ),
    chargeId: prefixed("charge"),
    network: z.string().describe("The CAIP-2 id of the chain, e.g. `eip155:8453`."),
    payer: z.string().describe("The authorization's `from`, in lower case."),
    transaction: z.string().nullable().describe("The settling transaction, once one is known."),
    errorReason: z
      .string()
      .nullable()
      .describe("Why a failed settlement failed, a reason code of the x402 protocol; null otherwise."),
  }),
  "What became of one x402 payment: public, since its id is unguessable; found too by the authorization's payer and nonce.",
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
        ownerKind: z.enum(["charge", "checkout_link", "merchant"]),
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
