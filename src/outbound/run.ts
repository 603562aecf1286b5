import type { Env, X402Settings } from "../env";
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

async function step(
  env: Env,
  x: X402Settings,
  t: OutboundTransfer,
  complete: Completion,
  now = Date.now(),
): Promise<Advance["kind"]> {
  const outcome = await advanceOutbound(env, x, t, now);
  if (outcome.kind === "waiting") {
    log.info("outbound_waiting", { purpose: t.purpose, id: t.id, reason: outcome.reason });
    return "waiting";
  }
  const recorded = await complete(env, x, t, outcome);
  // Recorded by another worker first is the one expected refusal; any other is a bug to see.
  if (recorded?.kind === "refused" && recorded.reason !== OUTCOME_RECORDED)
    log.error("outbound_outcome_refused", { purpose: t.purpose, id: t.id, reason: recorded.reason });
  // The outcome's event is in the outbox: out now, rather than at the next cron tick.
  await dispatchAfterWrite(env).catch((error) => log.warn("outbound_dispatch", { error }));
  return outcome.kind;
}

/** The cron's pass over one purpose's transfers that nobody has moved for a while (`now`: tests move the clock). */
export async function advanceDue(
  env: Env,
  x: X402Settings,
  purpose: OutboundPurpose,
  complete: Completion,
  now = Date.now(),
): Promise<Record<Advance["kind"], number>> {
  const counts: Record<Advance["kind"], number> = { confirmed: 0, failed: 0, waiting: 0 };
  for (const t of await dueOutbound(env, purpose, now)) {
    try {
      counts[await step(env, x, t, complete, now)]++;
    } catch (error) {
      counts.waiting++;
      log.warn("outbound_advance", { purpose, id: t.id, error });
    }
  }
  return counts;
}
