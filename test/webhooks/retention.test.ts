import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/config/env";
import { retentionJob } from "../../src/jobs/retention";
import { deleteInPages } from "../../src/lib/bounded-deletes";
import { webhookRetentionSteps } from "../../src/webhooks/retention";
import { cronTick } from "../helpers/cron";

// Webhook history older than RETENTION_DAYS leaves D1 a page at a time; what a pending delivery
// still needs stays, however old.

const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

interface Delivery {
  status: "pending" | "delivered" | "failed";
  createdDaysAgo: number;
  deliveredDaysAgo?: number;
}

/** An event dispatched `daysAgo` with the given deliveries, each with two attempts. Ids carry `tag`. */
async function history(tag: string, name: string, daysAgo: number, deliveries: Delivery[], now = Date.now()) {
  const eventId = `evt_${tag}_${name}`;
  const at = iso(now - daysAgo * DAY);
  await env.DB.batch([
    env.DB.prepare(
      "INSERT INTO outbox_events (id, type, merchant_id, data, created_at, dispatched_at) VALUES (?, 'charge.succeeded', NULL, '{}', ?, ?)",
    ).bind(eventId, at, at),
    ...deliveries.flatMap((d, i) => {
      const id = `whd_${tag}_${name}_${i}`;
      const created = iso(now - d.createdDaysAgo * DAY);
      return [
        env.DB.prepare(
          `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, type, status, attempts, next_attempt_at, created_at, delivered_at)
           VALUES (?, ?, ?, 'charge.succeeded', ?, 2, ?, ?, ?)`,
        ).bind(
          id,
          eventId,
          `we_${tag}_${i}`,
          d.status,
          d.status === "pending" ? created : null,
          created,
          d.deliveredDaysAgo === undefined ? null : iso(now - d.deliveredDaysAgo * DAY),
        ),
        ...[1, 2].map((attempt) =>
          env.DB.prepare(
            "INSERT INTO webhook_attempts (delivery_id, attempt, status_code, error, duration_ms, created_at) VALUES (?, ?, 500, NULL, 3, ?)",
          ).bind(id, attempt, created),
        ),
      ];
    }),
  ]);
  return eventId;
}

const count = async (sql: string, ...params: unknown[]) =>
  Number(
    await env.DB.prepare(sql)
      .bind(...params)
      .first("n"),
  );
const events = (tag: string) => count("SELECT COUNT(*) AS n FROM outbox_events WHERE id LIKE ?", `evt_${tag}_%`);
const eventExists = async (id: string) =>
  (await count("SELECT COUNT(*) AS n FROM outbox_events WHERE id = ?", id)) === 1;
const deliveriesOf = (eventId: string) =>
  count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE event_id = ?", eventId);
const attemptsOf = (eventId: string) =>
  count(
    "SELECT COUNT(*) AS n FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE event_id = ?) OR delivery_id LIKE ?",
    eventId,
    `whd_${eventId.slice(4)}_%`,
  );

describe("webhook retention", () => {
  it("deletes finished deliveries past the retention with their attempts, and events with no delivery left; keeps what is young or pending", async () => {
    const tag = crypto.randomUUID().slice(0, 8);
    const delivered = await history(tag, "delivered", 40, [
      { status: "delivered", createdDaysAgo: 40, deliveredDaysAgo: 40 },
    ]);
    const failed = await history(tag, "failed", 35, [{ status: "failed", createdDaysAgo: 35 }]);
    const noEndpoint = await history(tag, "none", 45, []);
    const young = await history(tag, "young", 10, [{ status: "delivered", createdDaysAgo: 10, deliveredDaysAgo: 10 }]);
    // Redelivered from the console: pending again, or delivered again lately. Its event is still read.
    const redelivering = await history(tag, "redelivering", 60, [{ status: "pending", createdDaysAgo: 60 }]);
    const redelivered = await history(tag, "redelivered", 60, [
      { status: "delivered", createdDaysAgo: 60, deliveredDaysAgo: 2 },
    ]);
    // One endpoint's delivery finished long ago, another's is still retrying: the event stays for the second.
    const mixed = await history(tag, "mixed", 50, [
      { status: "delivered", createdDaysAgo: 50, deliveredDaysAgo: 50 },
      { status: "pending", createdDaysAgo: 50 },
    ]);
    const undispatched = `evt_${tag}_undispatched`;
    await env.DB.prepare(
      "INSERT INTO outbox_events (id, type, merchant_id, data, created_at, dispatched_at) VALUES (?, 'charge.succeeded', NULL, '{}', ?, NULL)",
    )
      .bind(undispatched, iso(Date.now() - 90 * DAY))
      .run();

    const run = await deleteInPages(webhookRetentionSteps(env.DB, iso(Date.now() - 30 * DAY)), {
      limit: 100,
      budgetMs: 60_000,
    });

    expect(run.unfinished).toEqual([]);
    for (const gone of [delivered, failed, noEndpoint]) {
      expect(await eventExists(gone)).toBe(false);
      expect(await deliveriesOf(gone)).toBe(0);
      expect(await attemptsOf(gone)).toBe(0);
    }
    for (const kept of [young, redelivering, redelivered]) {
      expect(await eventExists(kept)).toBe(true);
      expect(await deliveriesOf(kept)).toBe(1);
      expect(await attemptsOf(kept)).toBe(2);
    }
    expect(await eventExists(mixed)).toBe(true);
    expect(await deliveriesOf(mixed)).toBe(1);
    expect(await attemptsOf(mixed)).toBe(2);
    expect(await eventExists(undispatched)).toBe(true);
  });

  it("stops on its time budget with the backlog named, and the next run takes the rest", async () => {
    const tag = crypto.randomUUID().slice(0, 8);
    for (let i = 0; i < 7; i++)
      await history(tag, `old${i}`, 40, [{ status: "delivered", createdDaysAgo: 40, deliveredDaysAgo: 40 }]);
    // A clock that moves 1 ms per reading: the budget lasts a few pages of 2 rows, not all of them.
    let t = 0;
    const clock = () => t++;
    const steps = () => webhookRetentionSteps(env.DB, iso(Date.now() - 30 * DAY));
    const first = await deleteInPages(steps(), { limit: 2, budgetMs: 4, clock });
    expect(first.unfinished).toContain("webhook_deliveries");
    expect(first.deleted.webhook_deliveries).toBeGreaterThan(0);
    expect(first.deleted.webhook_deliveries).toBeLessThan(7);
    expect(await events(tag)).toBeGreaterThan(0);

    const rest = await deleteInPages(steps(), { limit: 2, budgetMs: 60_000 });
    expect(rest.unfinished).toEqual([]);
    expect(first.deleted.webhook_deliveries! + rest.deleted.webhook_deliveries!).toBe(7);
    expect(await events(tag)).toBe(0);
    expect(await count("SELECT COUNT(*) AS n FROM webhook_attempts WHERE delivery_id LIKE ?", `whd_${tag}_%`)).toBe(0);
  });

  it("takes turns between tables, so a long backlog in one does not starve the others", async () => {
    const tag = crypto.randomUUID().slice(0, 8);
    for (let i = 0; i < 6; i++)
      await history(tag, `d${i}`, 40, [{ status: "delivered", createdDaysAgo: 40, deliveredDaysAgo: 40 }]);
    // An event with no delivery at all: deletable from the first turn.
    await history(tag, "lone", 40, []);
    let t = 0;
    const run = await deleteInPages(webhookRetentionSteps(env.DB, iso(Date.now() - 30 * DAY)), {
      limit: 1,
      budgetMs: 6,
      clock: () => t++,
    });
    // The deliveries' backlog outlasted the budget; the event step ran in the first turn all the same.
    expect(run.unfinished).toContain("webhook_deliveries");
    expect(run.deleted.outbox_events).toBeGreaterThanOrEqual(1);
  });

  it("runs on the minute cron with RETENTION_DAYS from the settings", async () => {
    const tag = crypto.randomUUID().slice(0, 8);
    const old = await history(tag, "old", 8, [{ status: "delivered", createdDaysAgo: 8, deliveredDaysAgo: 8 }]);
    const recent = await history(tag, "recent", 3, [{ status: "delivered", createdDaysAgo: 3, deliveredDaysAgo: 3 }]);
    await cronTick({ ...env, RETENTION_DAYS: "7" } as Env);
    expect(await eventExists(old)).toBe(false);
    expect(await attemptsOf(old)).toBe(0);
    expect(await eventExists(recent)).toBe(true);
    expect(await deliveriesOf(recent)).toBe(1);
  });

  it("keeps RETENTION_DAYS within 3 to 3650 days (the failing-endpoint check reads 3 days of deliveries) and defaults to 30", async () => {
    const tag = crypto.randomUUID().slice(0, 8);
    const at29 = await history(tag, "d29", 29, [{ status: "delivered", createdDaysAgo: 29, deliveredDaysAgo: 29 }]);
    const at31 = await history(tag, "d31", 31, [{ status: "delivered", createdDaysAgo: 31, deliveredDaysAgo: 31 }]);
    const { RETENTION_DAYS: _, ...defaults } = env as Env & { RETENTION_DAYS?: string };
    await retentionJob(defaults as Env);
    expect(await eventExists(at29)).toBe(true);
    expect(await eventExists(at31)).toBe(false);
    await expect(retentionJob({ ...env, RETENTION_DAYS: "-1" } as Env)).rejects.toThrow(/RETENTION_DAYS/);
    await expect(retentionJob({ ...env, RETENTION_DAYS: "2" } as Env)).rejects.toThrow(/RETENTION_DAYS/);
    await retentionJob({ ...env, RETENTION_DAYS: "3" } as Env);
    await expect(retentionJob({ ...env, RETENTION_DAYS: "3651" } as Env)).rejects.toThrow(/RETENTION_DAYS/);
  });
});
