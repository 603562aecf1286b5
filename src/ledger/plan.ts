import type { SqlStatement } from "../db/statements";
import type { AuditDraft } from "./chain";

/**
 * A commit plan is the serializable description of one atomic D1 batch: guard
 * statements first, then the state changes, ledger entries and outbox rows,
 * and the audit events the sequencer appends last. Plans cross Durable Object
 * RPC boundaries, so they hold plain SQL and parameters, never live statements.
 */
export interface CommitPlan {
  /** The ledger shard the plan is committed on (ledgerOf stamps it); absent means shard 0. */
  shard?: number;
  statements: SqlStatement[];
  audit: AuditDraft[];
}
