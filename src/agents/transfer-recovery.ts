/**
 * The minute cron's recovery of transfers between ledger shards lives with the ledger
 * (src/ledger/transfer-recovery.ts); this name stays until src/jobs/minute.ts imports it from there.
 */
export { recoverTransfers } from "../ledger/transfer-recovery";
