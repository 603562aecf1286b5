import { wholeNumberVar } from "../lib/settings";

/**
 * How old audit rows and ledger entries are before they move to R2 (ARCHIVE_AFTER_DAYS). 0 archives
 * everything a signed checkpoint covers (the chain's head always stays in D1).
 */
export const archiveShape = {
  ARCHIVE_AFTER_DAYS: wholeNumberVar({ max: 365 * 100, fallback: 90 }),
};

export function archiveSettings(s: { ARCHIVE_AFTER_DAYS: number }) {
  return { archiveAfterMs: s.ARCHIVE_AFTER_DAYS * 86_400_000 };
}
