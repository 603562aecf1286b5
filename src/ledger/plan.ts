/**
 * A commit plan is the serializable description of one atomic D1 batch: guard
 * statements first, then the state changes, ledger entries and outbox rows,
 * and the audit events the sequencer appends last. Plans cross Durable Object
 * RPC boundaries, so they hold plain SQL and parameters, never live statements.
 */
export interface SqlStatement {
  sql: string;
  params: (string | number | null)[];
}

export interface AuditDraft {
  type: string;
  reference: string | null;
  chargeId: string | null;
  agentId: string | null;
  merchantId: string | null;
  amountMinor: number;
  currency: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export interface CommitPlan {
  statements: SqlStatement[];
  audit: AuditDraft[];
}

export const sqlStatement = (sql: string, ...params: SqlStatement["params"]): SqlStatement => ({ sql, params });

/**
 * Aborts the whole batch with `reason` unless `condition` (an SQL boolean
 * expression over `params`) holds when the statement runs inside the batch.
 */
export const guard = (reason: string, condition: string, ...params: SqlStatement["params"]): SqlStatement => {
  if (!/^[a-z0-9_]+$/.test(reason)) throw new Error(`guard reason must be snake_case: ${reason}`);
  return sqlStatement(`INSERT INTO batch_guards (reason) SELECT ? WHERE NOT (${condition})`, reason, ...params);
};

/** The guard's reason when a batch was aborted by one, else null. */
export function guardReasonOf(error: unknown): string | null {
  const match = /batch_guard:([a-z0-9_]+)/.exec(String(error instanceof Error ? error.message : error));
  return match?.[1] ?? null;
}
