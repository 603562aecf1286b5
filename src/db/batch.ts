import type { SqlStatement } from "../ledger/plan";

/** Runs plain statements as one D1 batch (one transaction). */
export const executeBatch = (d1: D1Database, statements: SqlStatement[]) =>
  d1.batch(statements.map((s) => d1.prepare(s.sql).bind(...s.params)));

type Query = SqlStatement | { toSQL(): { sql: string; params: unknown[] } };

/**
 * Writes drizzle queries and plain statements together as one D1 batch, so a
 * row and what must commit with it (the stored answer of an idempotent
 * request) land together or not at all.
 */
export const writeTogether = (db: { $client: D1Database }, queries: Query[]) =>
  executeBatch(
    db.$client,
    queries.map((q) => {
      if (!("toSQL" in q)) return q;
      const { sql, params } = q.toSQL();
      return { sql, params: params as SqlStatement["params"] };
    }),
  );

/** Given what a write created, the statements that must commit with it (none by default). */
export type WithCreated<T> = (created: T) => Promise<SqlStatement[]>;
export const nothingMore = async (): Promise<SqlStatement[]> => [];
