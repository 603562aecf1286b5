import { z } from "zod";
import { Cents, named, prefixed, Timestamp } from "../lib/api-shapes";

/** Response bodies: PayLinks. */

const paylinkFields = {
  paylinkId: prefixed("paylink"),
  code: prefixed("paylinkCode"),
  business: z.string().nullable().describe("The merchant's name in the public view; null in the creation response."),
  label: z.string().nullable(),
  budgetMinor: z.number().int().positive(),
  perChargeMinor: z.number().int().positive().nullable(),
  maxUses: z.number().int().positive().nullable(),
  uses: Cents,
  remainingMinor: Cents,
  expiresAt: Timestamp.nullable(),
  status: z.enum(["active", "expired"]),
};

export const PaylinkPublic = named("PaylinkPublic", z.strictObject(paylinkFields));

export const PaylinkCreated = named(
  "PaylinkCreated",
  z.strictObject({ ...paylinkFields, acceptUrl: z.string().regex(/^\/pl\/.+\/accept$/) }),
);

export const PaylinkAccepted = named(
  "PaylinkAccepted",
  z.strictObject({ grantId: prefixed("grant"), paylink: PaylinkPublic }),
);

export const PaylinkDrawn = named(
  "PaylinkDrawn",
  z.strictObject({
    paid: z.literal(true),
    charge: z.strictObject({
      chargeId: prefixed("charge"),
      status: z.literal("paid"),
      method: z.literal("paylink"),
      reference: prefixed("payment"),
    }),
    spentMinor: Cents,
    remainingMinor: Cents,
    exhausted: z.boolean(),
  }),
);
