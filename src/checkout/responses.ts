import { z } from "zod";
import { Charge } from "../charges/responses";
import { Cents, named, prefixed, Timestamp, Usd } from "../lib/api-shapes";

/** Response bodies: Checkout links. */

const checkoutLinkFields = {
  checkoutLinkId: prefixed("checkoutLink"),
  checkoutToken: prefixed("checkoutToken"),
  checkoutUrl: z.string().regex(/^\/checkout\//),
  amountMinor: z.number().int().positive(),
  currency: Usd,
  description: z.string(),
  visits: Cents,
  paymentsCount: Cents,
  totalPaidMinor: Cents,
};

export const CheckoutLinkCreated = named("CheckoutLinkCreated", z.strictObject(checkoutLinkFields));

export const CheckoutLink = named(
  "CheckoutLink",
  z.strictObject({ ...checkoutLinkFields, active: z.boolean(), createdAt: Timestamp }),
  "A checkout link in the merchant's list (also the PATCH response).",
);

export const CheckoutLinkList = named(
  "CheckoutLinkList",
  z.strictObject({ links: z.array(CheckoutLink), total: Cents }),
);

export const CheckoutLinkPublic = named(
  "CheckoutLinkPublic",
  z.strictObject({
    checkoutLinkId: prefixed("checkoutLink"),
    amountMinor: z.number().int().positive(),
    currency: Usd,
    description: z.string(),
    merchantName: z.string(),
    active: z.boolean(),
    status: z.literal("active"),
    visits: Cents,
    paymentsCount: Cents,
    totalPaidMinor: Cents,
  }),
);

export const CheckoutPaid = named("CheckoutPaid", z.strictObject({ paid: z.literal(true), charge: Charge }));
