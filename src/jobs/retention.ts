import { expiredAnswersStep, expiredClaimsStep, expiredSessionsStep } from "../auth/retention";
import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { placementOf } from "../ledger/place";
import { shardLabel } from "../ledger/shard-labels";
import { type BoundedDeleteRun, type DeleteStep, deleteInPages } from "../lib/bounded-deletes";
import { log } from "../lib/log";
import { expiredRateLimitsStep } from "../lib/rate-limit";
import { nowIso } from "../lib/time";
import { dispatchedOutboxStep, webhookRetentionSteps } from "../webhooks/retention";

/** Rows per delete: small enough that one statement never holds D1 long, whatever the backlog. */
const PAGE_ROWS = 500;
/** How long one cron run deletes before leaving the rest to the next minute. */
const BUDGET_MS = 10_000;
const DAY_MS = 86_400_000;

/**
 * The minute cron's storage upkeep: expired rows (idempotent answers, rate-limit counters, revoked
 * sessions) and webhook history older than RETENTION_DAYS, a page at a time within a time budget.
 * Money history is never deleted here: audit rows and ledger entries are archived, not dropped.
 */
export async function retentionJob(
  env: Env,
  {
    now = Date.now(),
    budgetMs = BUDGET_MS,
    pageRows = PAGE_ROWS,
    retentionDays = settingsOf(env).retentionDays,
  }: { now?: number; budgetMs?: number; pageRows?: number; retentionDays?: number } = {},
): Promise<BoundedDeleteRun> {
  const cutoffIso = nowIso(now - retentionDays * DAY_MS);
  const control = placementOf(env).control.db;
  // Control's own rows in control's run only (the job runs once per place; `each()` is its place).
  const inControl = placementOf(env)
    .each()
    .some((at) => at.isControl);
  const run = await deleteInPages(
    [
      ...(inControl ? [...expiredRowSteps(control, now), ...webhookRetentionSteps(control, cutoffIso)] : []),
      ...shardSteps(env, now, cutoffIso),
    ],
    { limit: pageRows, budgetMs },
  );
  // A backlog that outlasts the budget is worth knowing about: it says deletes fall behind the writes.
  if (run.unfinished.length > 0) log.warn("retention", { unfinished: run.unfinished, deleted: run.deleted });
  return run;
}

/**
 * Rows that outlived their use, in control: stored idempotent answers and key claims past their
 * expiry, rate-limit counters whose window is over, and revoked console sessions whose token has
 * expired anyway. Each owner says which of its rows those are.
 */
export function expiredRowSteps(db: D1Database, now = Date.now()): DeleteStep[] {
  const at = nowIso(now);
  return [
    expiredAnswersStep(db, at),
    expiredClaimsStep(db, at),
    expiredRateLimitsStep(db, now),
    expiredSessionsStep(db, at),
  ];
}

/**
 * What each ledger shard but control keeps of the same: its stored idempotent answers and its outbox. A
 * shard's dispatched event was copied into the control database when it was forwarded (the copy is
 * what deliveries read), so past the retention it goes; an undispatched one never does. The other
 * tables the steps above clean (rate limits, sessions, deliveries) live in control only.
 */
function shardSteps(env: Env, now: number, cutoffIso: string): DeleteStep[] {
  return placementOf(env)
    .each()
    .filter((at) => !at.isControl)
    .flatMap((at) => {
      // A step's name is what the log shows when it falls behind: the table and the shard's number.
      const shard = shardLabel(at);
      return [
        expiredAnswersStep(at.db, nowIso(now), `idempotency_keys:${shard}`),
        dispatchedOutboxStep(at.db, cutoffIso, `outbox_events:${shard}`),
      ];
    });
}
