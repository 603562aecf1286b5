import { currentInvocation, type Spend } from "./invocation";
import { log } from "./log";

/*
 * A job's question before each item: is there room in this invocation for the item's worst case?
 * When there is not, the job stops and says so (a warning naming what stopped and what was spent):
 * the rest waits for the next run, where it is found again as due. Never a silent wait.
 */

export type Need = Partial<Record<Spend, number>>;

/** `need` times `n` (a group of items taken side by side). */
export const times = (need: Need, n: number): Need => ({
  d1Queries: (need.d1Queries ?? 0) * n,
  subrequests: (need.subrequests ?? 0) * n,
});

/** Whether `need` fits in what the current invocation has left; if not, logged as `what` stopping. */
export function roomFor(need: Need, what: string, context: Record<string, unknown> = {}): boolean {
  const invocation = currentInvocation();
  if (invocation.left(need)) return true;
  log.warn("invocation_bound", { what, ...context, need, spent: invocation.spent });
  return false;
}
