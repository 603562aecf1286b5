import { z } from "zod";

/** How long an approval request waits for a decision (APPROVAL_TTL_HOURS, at most 30 days). */
export const approvalsShape = {
  APPROVAL_TTL_HOURS: z.coerce
    .number()
    .int()
    .positive()
    .max(24 * 30)
    .default(24),
};

export function approvalSettings(s: { APPROVAL_TTL_HOURS: number }) {
  return { approvalTtlMs: s.APPROVAL_TTL_HOURS * 3600_000 };
}
