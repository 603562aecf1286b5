import { env } from "cloudflare:workers";

/*
 * A table of the control database read whole and put back, for tests that tamper with it behind the
 * service's back (as an operator with database access could) and restore it between cases.
 */

/** Every row of `table`, by `seq`. */
export const rowsOf = async (table: string) =>
  (await env.DB.prepare(`SELECT * FROM ${table} ORDER BY seq`).all()).results;

/** Replaces `table`'s rows with `rows` (as `rowsOf` read them). */
export async function restoreRows(table: string, rows: Record<string, unknown>[]) {
  await env.DB.prepare(`DELETE FROM ${table}`).run();
  for (const row of rows) {
    const columns = Object.keys(row);
    await env.DB.prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
      .bind(...columns.map((c) => row[c]))
      .run();
  }
}
