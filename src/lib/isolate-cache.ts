/**
 * A per-isolate memory of at most `max` entries, the oldest forgotten first,
 * each for at most `ttlMs`. Only for facts that cannot change underneath it
 * (or whose staleness the TTL bounds), and only for ones that exist: callers
 * never remember a miss, so a new row is seen at once.
 */
export class IsolateCache<K, V> {
  private readonly entries = new Map<K, { value: V; until: number }>();

  constructor(
    private readonly max: number,
    private readonly ttlMs = Number.POSITIVE_INFINITY,
  ) {}

  get(key: K, now = Date.now()): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.until > now) return entry.value;
    this.entries.delete(key);
    return undefined;
  }

  /** Remembers `value` for the cache's TTL, or for `ttlMs` when that is shorter (a fact with an end of its own). */
  set(key: K, value: V, now = Date.now(), ttlMs = this.ttlMs): void {
    this.entries.delete(key);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, until: now + Math.min(ttlMs, this.ttlMs) });
  }

  delete(key: K): void {
    this.entries.delete(key);
  }
}
