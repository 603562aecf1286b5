/**
 * Merges lists that are each sorted by `before` (a comparator: negative when a goes first) into one,
 * of at most `limit` items. Ties go to the earlier list, and each list keeps its own order, so with
 * one list the answer is that list's first `limit` items. Used to read one page over ledger shards:
 * each shard answers its own first page, and the merge keeps the first page of all.
 */
export function mergeSorted<T>(lists: readonly (readonly T[])[], before: (a: T, b: T) => number, limit: number): T[] {
  const at = lists.map(() => 0);
  const out: T[] = [];
  while (out.length < limit) {
    let pick = -1;
    for (const [i, list] of lists.entries()) {
      if (at[i]! >= list.length) continue;
      if (pick < 0 || before(list[at[i]!]!, lists[pick]![at[pick]!]!) < 0) pick = i;
    }
    if (pick < 0) break;
    out.push(lists[pick]![at[pick]!]!);
    at[pick]!++;
  }
  return out;
}

/** Newest first by an ISO timestamp; a missing one sorts last (as SQLite's NULL does in DESC order). */
export const newestFirst =
  <T>(key: (item: T) => string | null) =>
  (a: T, b: T): number => {
    const x = key(a);
    const y = key(b);
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return x > y ? -1 : 1;
  };
