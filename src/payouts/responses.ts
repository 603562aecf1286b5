import { z } from "zod";
import { Cents, EvmAddress, named, prefixed, Timestamp, Usd } from "../lib/api-shapes";

/** Response bodies: payouts of a merchant's balance to its payout address. */

const TxHash = z.string().regex(/^0x[0-9a-f]{64}$/);

export const Payout = named(
  "Payout",
  z.strictObject({
    payoutId: prefixed("payout"),
    merchantId: prefixed("merchant"),
    amountMinor: z.number().int().positive(),
    currency: Usd,
    destination: EvmAddress.describe("The merchant's payout address when the payout was made."),
    status: z
      .enum(["pending", "paid", "failed"])
      .describe(
        "`pending`: debited, being sent; `paid`: the transfer is mined; `failed`: the amount is back in the balance.",
      ),
    transaction: TxHash.nullable().describe("The transfer's transaction hash once paid."),
    failureReason: z
      .string()
      .nullable()
      .describe(
        "Why it failed: `treasury_insufficient_funds` (before it was sent), `authorization_expired` (sent, never used on chain within its hour), `authorization_canceled`.",
      ),
    createdAt: Timestamp,
    paidAt: Timestamp.nullable(),
  }),
);

export const PayoutCreated = named(
  "PayoutCreated",
  z.strictObject({ payout: Payout, balanceMinor: Cents.describe("The merchant's balance after the debit.") }),
);

export const PayoutOne = named("PayoutOne", z.strictObject({ payout: Payout }));

export const PayoutList = named("PayoutList", z.strictObject({ payouts: z.array(Payout) }));
