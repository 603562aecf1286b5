import { z } from "zod";
import { Charge } from "../charges/responses";
import { named, prefixed, Timestamp } from "../lib/api-shapes";
import { APPROVAL_STATUSES } from "./service";

/** Response bodies: Approvals held for a human. */

export const Approval = named(
  "Approval",
  z.strictObject({
    approvalId: prefixed("approval"),
    chargeId: prefixed("charge"),
    agentId: prefixed("agent"),
    merchantId: prefixed("merchant"),
    amountMinor: z.number().int().positive(),
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
