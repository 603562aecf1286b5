import { dbOfShard, shardNumbers } from "../db/shards";
import { settingsOf, type Env, type X402Settings } from "../env";
import { log } from "../lib/log";
import { dispatchAfterWrite } from "../webhooks/dispatch";
import type { CommitResult } from "../ledger/ledger.do";
import { advanceOutbound, dueOutbound, OUTCOME_RECORDED, outboundOf, type Advance } from "./advance";
import type { OutboundPurpose, OutboundTransfer } from "./authorization";

/**
 * Records a decided outcome for the owner (a payout paid, a refund reversed), idempotently: its
 * ledger commit is refused with OUTCOME_RECORDED when another worker recorded it first.
 */
export type Completion = (
  env: Env,
  x: X402Settings,
  t: OutboundTransfer,
  outcome: Exclude<Advance, { kind: "waiting" }>,
) => Promise<(Pick<CommitResult, "kind"> & { reason?: string }) | null>;

/** One step with the transfer of one owner, and its outcome recorded once it is decided. */
export async function runOutbound(
  env: Env,
  x: X402Settings,
  purpose: OutboundPurpose,
  ownerId: string,
  complete: Completion,
): Promise<Advance["kind"] | "missing"> {
  const t = await outboundOf(env, purpose, ownerId);
  if (!t) return "missing";
  return step(env, x, t, complete);
}

/** How the cron's pass over one purpose goes. */
export interface DuePass {
  /** The most transfers stepped in one run. */
  limit?: number;
  /** Transfers stepped side by side: each waits for its receipt, the gas keys' lanes order the sends. */
  atOnce?: number;
  /** Also step transfers never handed over, however fresh. */
  withUnsent?: boolean;
  /** A transfer whose key the service does not hold (anymore) and never handed over fails rather than waits. */
  failWithoutKey?: boolean;
}

async function step(
  env: Env,
  x: X402Settings,
  t: OutboundTransfer,
  complete: Completion,
  now = Date.now(),
  pass: DuePass = {},
): Promise<Advance["kind"]> {
  let outcome = await advanceOutbound(env, x, t, now);
  if (pass.failWithoutKey && outcome.kind === "waiting" && outcome.reason === "signer_key_missing" && !t.broadcastAt)
    outcome = { kind: "failed", reason: "signer_key_missing", unsent: true };
  if (outcome.kind === "waiting") {
    log.info("outbound_waiting", { purpose: t.purpose, id: t.id, reason: outcome.reason });
    return "waiting";
  }
  const recorded = await complete(env, x, t, outcome);
  // Recorded by another worker first is the one expected refusal; any other is a bug to see.
  if (recorded?.kind === "refused" && recorded.reason !== OUTCOME_RECORDED)
    log.error("outbound_outcome_refused", { purpose: t.purpose, id: t.id, reason: recorded.reason });
  // The outcome's event is in the outbox: out now, rather than at the next cron tick (none for a sweep).
  if (recorded) await dispatchAfterWrite(env).catch((error) => log.warn("outbound_dispatch", { error }));
  return outcome.kind;
}

/**
 * The cron's pass over one purpose's transfers that nobody has moved for a while (`now`: tests move
 * the clock), in every ledger shard's database (a payout or refund lives in its merchant's; sweeps
 * only in shard 0's): the shards one after the other, each with `pass.limit`.
 */
export async function advanceDue(
  env: Env,
  x: X402Settings,
  purpose: OutboundPurpose,
  complete: Completion,
  now = Date.now(),
  pass: DuePass = {},
): Promise<Record<Advance["kind"], number>> {
  const counts: Record<Advance["kind"], number> = { confirmed: 0, failed: 0, waiting: 0 };
  const due: OutboundTransfer[] = [];
  for (const k of shardNumbers(env, settingsOf(env).ledgerShards))
    due.push(...(await dueOutbound(dbOfShard(env, k), purpose, now, pass.limit, pass.withUnsent)));
  const atOnce = pass.atOnce ?? 1;
  for (let i = 0; i < due.length; i += atOnce) {
    const group = due.slice(i, i + atOnce);
    const steps = await Promise.allSettled(group.map((t) => step(env, x, t, complete, now, pass)));
    for (const [j, stepped] of steps.entries()) {
      if (stepped.status === "fulfilled") counts[stepped.value]++;
      else {
        counts.waiting++;
        log.warn("outbound_advance", { purpose, id: group[j]!.id, error: stepped.reason });
      }
    }
  }
  return counts;
}
