import { z } from "zod";
import { BaseUnits, Cents, CentsIfWhole, named, prefixed, Timestamp, Usd } from "../lib/api-shapes";

/** Response bodies: Charges, and paying one from an agent wallet. */

export const Charge = named(
  "Charge",
  z.strictObject({
    chargeId: prefixed("charge"),
    merchantId: prefixed("merchant"),
    agentId: prefixed("agent")
      .nullable()
      .describe("Null while unpaid, and for an x402 payment (the payer is an address)."),
    amountMinor: CentsIfWhole(
      "The amount in cents; null when it is not a whole number of cents (a payment priced below a cent): `amountBaseUnits` states it.",
    ),
    amountBaseUnits: BaseUnits.describe("The exact amount in the token's base units (1 cent = 10,000)."),
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
    refundedMinor: Cents.describe(
      "The sum of the charge's refunds that are not `failed`, in whole cents rounded down (a refund below a cent leaves it as it was); 0 when none.",
    ),
    refundedBaseUnits: BaseUnits.describe(
      "The exact sum of the charge's refunds that are not `failed`, in the token's base units; `\"0\"` when none.",
    ),
    resource: z
      .string()
      .optional()
      .describe(
        "Only on a charge paid through the service as the merchant's own x402 facilitator: the URL that payment paid for. Absent on every other charge.",
      ),
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
