import { z } from "zod";
import { Charge } from "../charges/responses";
import { BaseUnits, CentsIfWhole, named, prefixed, Timestamp } from "../lib/api-shapes";
import { APPROVAL_STATUSES } from "./service";

/** Response bodies: Approvals held for a human. */

const ApprovalX402Payment = named(
  "ApprovalX402Payment",
  z.strictObject({
    resource: z.string().describe("The URL the agent asked to pay for."),
    payTo: z.string().describe("The payee's address."),
    network: z.string(),
    asset: z.string(),
    paymentId: prefixed("agentX402Payment")
      .nullable()
      .describe("The payment that used this granted approval; null until one did (one approval lets one through)."),
  }),
  "Present only for an approval of an agent's outbound x402 payment: the one request it lets through, with the approval's exact amount. Granting it pays nothing; the agent's same request, made again before `expiresAt`, pays.",
);

export const Approval = named(
  "Approval",
  z.strictObject({
    approvalId: prefixed("approval"),
    chargeId: prefixed("charge").nullable().describe("The held charge; null for an outbound x402 payment's approval."),
    agentId: prefixed("agent"),
    merchantId: prefixed("merchant")
      .nullable()
      .describe("The held charge's merchant; null for an outbound x402 payment's."),
    amountMinor: CentsIfWhole(
      "The held payment's amount in cents; null when it is not a whole number of cents: `amountBaseUnits` states it.",
    ),
    amountBaseUnits: BaseUnits.optional().describe(
      "The held payment's exact amount in the token's base units (1 cent = 10,000); present only when it is not a whole number of cents.",
    ),
    x402Payment: ApprovalX402Payment.optional(),
    reason: z.string(),
    status: z.enum(APPROVAL_STATUSES),
    expiresAt: Timestamp,
    createdAt: Timestamp,
  }),
);

export const ApprovalList = named("ApprovalList", z.strictObject({ approvals: z.array(Approval) }));

export const ApprovalGranted = named(
  "ApprovalGranted",
  z.strictObject({
    approval: z.strictObject({ approvalId: prefixed("approval"), status: z.literal("granted") }),
    charge: Charge.optional().describe(
      "The charge, paid. Absent for an outbound x402 payment's approval: granting it pays nothing; the agent's same request, made again before the approval expires, pays.",
    ),
  }),
);

export const ApprovalRejected = named(
  "ApprovalRejected",
  z.strictObject({ approval: z.strictObject({ approvalId: prefixed("approval"), status: z.literal("rejected") }) }),
);
