import type { SqlStatement } from "../ledger/plan";

/** Runs plain statements as one D1 batch (one transaction). */
export const executeBatch = (d1: D1Database, statements: SqlStatement[]) =>
  d1.batch(statements.map((s) => d1.prepare(s.sql).bind(...s.params)));
