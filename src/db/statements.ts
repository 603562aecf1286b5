/**
 * Plain SQL statements and the D1 batches that run them: the plumbing every
 * domain's writes share. A statement is plain SQL and parameters, never a live
 * prepared statement, so a plan of them can cross Durable Object RPC boundaries.
 * A guard aborts its whole batch with a reason (`guardReasonOf` reads it back).
 */
export interface SqlStatement {
  sql: string;
  params: (string | number | null)[];
  /**
   * Set on a plain multi-row insert (`appendRows`) into a table that no statement of a batch
   * reads for another plan's rows (ledger entries, outbox events): the sequencer may write its
   * rows after the group's other statements, in one insert with other plans' rows of the same
   * insert. (A manual credit's guard reads ledger entries for its own transfer id only, which is
   * new for every plan, so a group's deferred rows never change its answer.)
   */
  append?: { into: string; width: number };
}

export const sqlStatement = (sql: string, ...params: SqlStatement["params"]): SqlStatement => ({ sql, params });

/** D1 binds at most 100 parameters per statement. */
export const MAX_PARAMS = 100;

/**
 * `into` ("INSERT INTO t (a, b)") with one VALUES row per entry of `rows`, each `width` values
 * wide: one statement that a sequencer may merge with other plans' rows of the same insert
 * (see SqlStatement.append). Only for tables no statement of a batch reads.
 */
export function appendRows(into: string, width: number, rows: SqlStatement["params"][]): SqlStatement {
  if (rows.length === 0 || rows.some((row) => row.length !== width))
    throw new Error(`appendRows needs rows of ${width} values`);
  const placeholders = `(${Array(width).fill("?").join(", ")})`;
  return {
    sql: `${into} VALUES ${rows.map(() => placeholders).join(", ")}`,
    params: rows.flat(),
    append: { into, width },
  };
}

/**
 * Appendable inserts (SqlStatement.append) with their rows merged: one statement per insert, or
 * as few as the parameter limit allows, rows in the order given.
 */
export function mergeAppends(statements: SqlStatement[]): SqlStatement[] {
  const rowsByInsert = new Map<string, { width: number; rows: SqlStatement["params"][] }>();
  for (const { append, params } of statements) {
    if (!append) throw new Error("mergeAppends takes appendable inserts only");
    const insert = rowsByInsert.get(append.into) ?? { width: append.width, rows: [] };
    for (let at = 0; at < params.length; at += append.width) insert.rows.push(params.slice(at, at + append.width));
    rowsByInsert.set(append.into, insert);
  }
  const merged: SqlStatement[] = [];
  for (const [into, { width, rows }] of rowsByInsert) {
    const perInsert = Math.max(1, Math.floor(MAX_PARAMS / width));
    for (let at = 0; at < rows.length; at += perInsert)
      merged.push(appendRows(into, width, rows.slice(at, at + perInsert)));
  }
  return merged;
}

/**
 * Aborts the whole batch with `reason` unless `condition` (an SQL boolean
 * expression over `params`) holds when the statement runs inside the batch.
 */
export const guard = (reason: string, condition: string, ...params: SqlStatement["params"]): SqlStatement => {
  checkReason(reason);
  return sqlStatement(`INSERT INTO batch_guards (reason) SELECT ? WHERE NOT (${condition})`, reason, ...params);
};

/** One condition of `guards`: [reason, condition, ...params], as `guard` takes them. */
export type GuardCheck = [reason: string, condition: string, ...params: SqlStatement["params"]];

/**
 * Several guards in one statement: the batch aborts with the reason of the first check that does
 * not hold, as the same guards one after another would, for one statement's cost instead of one
 * each (the sequencer's batches carry many plans).
 */
export function guards(...checks: GuardCheck[]): SqlStatement {
  if (checks.length === 0) throw new Error("guards needs at least one check");
  if (checks.length === 1) return guard(...checks[0]!);
  for (const [reason] of checks) checkReason(reason);
  const cases = checks.map(([, condition]) => `WHEN NOT (${condition}) THEN ?`).join(" ");
  const all = checks.map(([, condition]) => `(${condition})`).join(" AND ");
  return sqlStatement(
    `INSERT INTO batch_guards (reason) SELECT CASE ${cases} END WHERE NOT (${all})`,
    ...checks.flatMap(([reason, , ...params]) => [...params, reason]),
    ...checks.flatMap(([, , ...params]) => params),
  );
}

function checkReason(reason: string) {
  if (!/^[a-z0-9_]+$/.test(reason)) throw new Error(`guard reason must be snake_case: ${reason}`);
}

/** The guard's reason when a batch was aborted by one, else null. */
export function guardReasonOf(error: unknown): string | null {
  const match = /batch_guard:([a-z0-9_]+)/.exec(String(error instanceof Error ? error.message : error));
  return match?.[1] ?? null;
}

/** A plain statement prepared on `d1`: run alone, or in one batch with other prepared statements (one snapshot). */
export const prepared = (d1: D1Database, s: SqlStatement) => d1.prepare(s.sql).bind(...s.params);

/** Runs plain statements as one D1 batch (one transaction). */
export const executeBatch = (d1: D1Database, statements: SqlStatement[]) =>
  d1.batch(statements.map((s) => d1.prepare(s.sql).bind(...s.params)));

/**
 * Runs reads as one D1 batch (one transaction, so one snapshot): each statement's rows, in order.
 * `Rows` names each statement's row type: `readTogether<[A, B]>(d1, a, b)` gives `[A[], B[]]`.
 */
export async function readTogether<Rows extends unknown[]>(
  d1: D1Database,
  ...statements: { [K in keyof Rows]: SqlStatement }
): Promise<{ [K in keyof Rows]: Rows[K][] }> {
  const results = await executeBatch(d1, statements as SqlStatement[]);
  return results.map((r) => r.results) as { [K in keyof Rows]: Rows[K][] };
}

/** Given what a write created, the statements that must commit with it (none by default). */
export type WithCreated<T> = (created: T) => Promise<SqlStatement[]>;
export const nothingMore = async (): Promise<SqlStatement[]> => [];
