/*
 * Deleting old rows without ever running one statement over an unbounded set: each step deletes
 * at most `limit` rows per D1 call, the steps take turns (so a table with a long backlog does not
 * starve the others), and the run stops when every step has caught up or the time budget is spent.
 * Whatever is left waits for the next run, the cron's next minute. A page is one D1 statement, and
 * the run also stops when the invocation has none left.
 */

import { currentInvocation } from "./invocation";
import { roomFor } from "./room";

export interface DeleteStep {
  name: string;
  /** Deletes at most `limit` rows and says how many it deleted. */
  run(limit: number): Promise<number>;
}

export interface BoundedDeleteRun {
  /** Rows deleted by each step in this run. */
  deleted: Record<string, number>;
  /** Steps whose last page was full when the budget ran out: more is left for the next run. */
  unfinished: string[];
}

export async function deleteInPages(
  steps: DeleteStep[],
  { limit, budgetMs, clock = Date.now }: { limit: number; budgetMs: number; clock?: () => number },
): Promise<BoundedDeleteRun> {
  const deadline = clock() + budgetMs;
  const deleted = Object.fromEntries(steps.map((step) => [step.name, 0]));
  // A step that deleted fewer rows than its limit has caught up for now.
  let behind = steps;
  while (behind.length > 0 && clock() < deadline && roomFor({ d1Queries: 1 }, "bounded_deletes")) {
    const next: DeleteStep[] = [];
    for (const step of behind) {
      // One statement a page: a run stops before the invocation's count as before its time.
      if (clock() >= deadline || !currentInvocation().left({ d1Queries: 1 })) {
        next.push(step);
        continue;
      }
      const n = await step.run(limit);
      deleted[step.name]! += n;
      if (n >= limit) next.push(step);
    }
    behind = next;
  }
  return { deleted, unfinished: behind.map((step) => step.name) };
}

/**
 * A step that deletes a page of the rows of `table` matching `where` (which an index should serve,
 * so finding the page reads about as many rows as it deletes).
 */
export const pagedDelete = (db: D1Database, name: string, table: string, where: string, ...binds: unknown[]) => ({
  name,
  async run(limit: number) {
    const result = await db
      .prepare(`DELETE FROM ${table} WHERE rowid IN (SELECT rowid FROM ${table} WHERE ${where} LIMIT ?)`)
      .bind(...binds, limit)
      .run();
    return result.meta.changes;
  },
});
