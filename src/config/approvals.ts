import { wholeNumberVar } from "../lib/settings";

/** How long an approval request waits for a decision (APPROVAL_TTL_HOURS, at most 30 days). */
export const approvalsShape = {
  APPROVAL_TTL_HOURS: wholeNumberVar({ min: 1, max: 24 * 30, fallback: 24 }),
};

export function approvalSettings(s: { APPROVAL_TTL_HOURS: number }) {
  return { approvalTtlMs: s.APPROVAL_TTL_HOURS * 3600_000 };
}
