/** Timestamps are ISO 8601 in UTC with milliseconds, so they sort as text. */
export const nowIso = (now = Date.now()) => new Date(now).toISOString();

/** Start of the UTC day containing `now`, as ISO text. */
export function utcDayStart(now = Date.now()): string {
  const d = new Date(now);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())).toISOString();
}
