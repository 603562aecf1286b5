import { nowIso, utcDayStart } from "../../lib/time";

/** The overview's figures for today (UTC). */
export interface Overview {
  paid: { n: number; cents: number };
  /** Paid cents by UTC hour of today, 24 entries. */
  paidCentsByHour: number[];
  createdToday: number;
  pendingApprovals: number;
  merchants: number;
  agents: number;
}

/** The overview's figures, read in one batch so they agree with each other. Console-only reporting across domains. */
export async function readOverview(db: D1Database): Promise<Overview> {
  const dayStart = utcDayStart();
  const [totals, byHour, pending, counts] = await db.batch([
    db
      .prepare(
        "SELECT COUNT(*) AS n, COALESCE(SUM(amount_minor), 0) AS cents FROM charges WHERE status = 'paid' AND paid_at >= ?",
      )
      .bind(dayStart),
    db
      .prepare(
        "SELECT CAST(substr(paid_at, 12, 2) AS INTEGER) AS hour, SUM(amount_minor) AS cents FROM charges WHERE status = 'paid' AND paid_at >= ? GROUP BY hour",
      )
      .bind(dayStart),
    db.prepare("SELECT COUNT(*) AS n FROM approvals WHERE status = 'pending' AND expires_at > ?").bind(nowIso()),
    db
      .prepare(
        "SELECT (SELECT COUNT(*) FROM merchants) AS merchants, (SELECT COUNT(*) FROM agents) AS agents, (SELECT COUNT(*) FROM charges WHERE created_at >= ?) AS created",
      )
      .bind(dayStart),
  ]);
  const paid = totals!.results[0] as { n: number; cents: number };
  const paidCentsByHour = Array<number>(24).fill(0);
  for (const row of byHour!.results as { hour: number; cents: number }[]) paidCentsByHour[row.hour] = row.cents;
  const k = counts!.results[0] as { merchants: number; agents: number; created: number };
  return {
    paid,
    paidCentsByHour,
    createdToday: k.created,
    pendingApprovals: (pending!.results[0] as { n: number }).n,
    merchants: k.merchants,
    agents: k.agents,
  };
}
