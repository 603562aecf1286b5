import { z } from "zod";
import { Charge } from "../charges/responses";
import { BaseUnits, CentsIfWhole, named, prefixed, Timestamp, Usd } from "../lib/api-shapes";

/** Response bodies: refunds of paid charges. */

export const Refund = named(
  "Refund",
  z.strictObject({
    refundId: prefixed("refund"),
    chargeId: prefixed("charge"),
    amountMinor: CentsIfWhole(
      "The amount in cents; null when it is not a whole number of cents (a refund of a payment below a cent): `amountBaseUnits` states it.",
    ),
    amountBaseUnits: BaseUnits.describe("The exact amount in the token's base units (1 cent = 10,000)."),
    currency: Usd,
    method: z.enum(["ledger", "paylink", "x402"]).describe("The charge's."),
    status: z
      .enum(["pending", "succeeded", "failed"])
      .describe(
        "A wallet refund is `succeeded` at once; an x402 refund is `pending` until its transfer to the payer is mined (`succeeded`) or it fails (`failed`: the amount is back in the merchant's balance).",
      ),
    transaction: z
      .string()
      .regex(/^0x[0-9a-f]{64}$/)
      .nullable()
      .describe("The transfer back to the payer, for an x402 refund that succeeded."),
    failureReason: z.string().nullable(),
    createdAt: Timestamp,
  }),
);

export const RefundCreated = named(
  "RefundCreated",
  z.strictObject({
    refund: Refund,
    charge: Charge.describe("The charge after the refund, with `refundedMinor` and `refundedBaseUnits`."),
  }),
);

export const RefundList = named("RefundList", z.strictObject({ refunds: z.array(Refund) }));

export const RefundDestinationFlagged = named(
  "RefundDestinationFlagged",
  z.strictObject({ error: z.literal("refund_destination_flagged"), verdict: z.enum(["block"]), reason: z.string() }),
);
