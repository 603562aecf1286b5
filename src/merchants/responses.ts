import { z } from "zod";
import { KytResult } from "../kyt/responses";
import { BaseUnits, Cents, EvmAddress, named, PreviousKeyExpiresAt, prefixed, Timestamp, Usd } from "../lib/api-shapes";

/** Response bodies: Merchants: registration, their own record, payout address and keys. */

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
    balanceMinor: Cents.describe("The balance in whole cents, rounded down."),
    balanceBaseUnits: BaseUnits.describe("The exact balance in the token's base units (1 cent = 10,000)."),
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
    balanceMinor: Cents.describe("The balance in whole cents, rounded down."),
    balanceBaseUnits: BaseUnits.describe("The exact balance in the token's base units (1 cent = 10,000)."),
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

export const MerchantKeyRolled = named(
  "MerchantKeyRolled",
  z.strictObject({
    merchantId: prefixed("merchant"),
    apiKey: prefixed("merchantKey").describe("Shown exactly once."),
    previousKeyExpiresAt: PreviousKeyExpiresAt,
  }),
);
