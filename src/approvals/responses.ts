import { z } from "zod";
import { Charge } from "../charges/responses";
import { BaseUnits, CentsIfWhole, named, prefixed, Timestamp } from "../lib/api-shapes";
import { APPROVAL_STATUSES } from "./service";

/** Response bodies: Approvals held for a human. */

export const Approval = named(
  "Approval",
  z.strictObject({
    approvalId: prefixed("approval"),
    chargeId: prefixed("charge"),
    agentId: prefixed("agent"),
    merchantId: prefixed("merchant"),
    amountMinor: CentsIfWhole(
      "The held payment's amount in cents; null when it is not a whole number of cents: `amountBaseUnits` states it.",
    ),
    amountBaseUnits: BaseUnits.optional().describe(
      "The held payment's exact amount in the token's base units (1 cent = 10,000); present only when it is not a whole number of cents.",
    ),
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
    charge: Charge,
  }),
);

export const ApprovalRejected = named(
  "ApprovalRejected",
  z.strictObject({ approval: z.strictObject({ approvalId: prefixed("approval"), status: z.literal("rejected") }) }),
);
