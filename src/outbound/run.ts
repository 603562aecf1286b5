import { JUST_SENT_RECEIPT_READS } from "../chain/client";
import type { Env, X402Settings } from "../config/env";
import type { CommitResult } from "../ledger/ledger.do";
import { placeForLog } from "../ledger/made-places";
import { placementOf } from "../ledger/place";
import { log } from "../lib/log";
import { roomFor, times } from "../lib/room";
import { dispatchAfterWrite } from "../webhooks/dispatch";
import { type Advance, advanceOutbound, dueOutbound, OUTCOME_RECORDED, outboundOf } from "./advance";
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
  /** The most transfers stepped in one run, over every shard (`DUE_PER_RUN` unless given). */
  limit?: number;
  /**
   * Transfers stepped side by side: each waits for its receipt, the gas keys' lanes order the sends.
   * One unless given, or BATCHED_AT_ONCE when transfers are sent in settlement batches.
   */
  atOnce?: number;
  /** Also step transfers never handed over, however fresh. */
  withUnsent?: boolean;
  /** A transfer whose key the service does not hold (anymore) and never handed over fails rather than waits. */
  failWithoutKey?: boolean;
  /** The cron's pass (set by `advanceDue`): receipts read once, the run bounded by the invocation's counts. */
  cron?: boolean;
}

async function step(
  env: Env,
  x: X402Settings,
  t: OutboundTransfer,
  complete: Completion,
  now = Date.now(),
  pass: DuePass = {},
): Promise<Advance["kind"]> {
  // The cron's pass reads a receipt once and looks again next run; a request waits for it.
  let outcome = await advanceOutbound(env, x, t, now, pass.cron ? "now" : "wait");
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
 * the clock), in every place's database (a payout, refund or sweep lives in its owner's place). The
 * places are read side by side and each on its own: a shard whose database fails is logged and
 * skipped, and the others' transfers are still stepped. Their due rows are taken in turn (one of
 * each place, then the next), so no shard waits behind another's backlog, up to `pass.limit` in
 * the run.
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
  const limit = pass.limit ?? DUE_PER_RUN;
  const places = placementOf(env).each();
  const reads = await Promise.allSettled(places.map(({ db }) => dueOutbound(db, purpose, now, limit, pass.withUnsent)));
  const perPlace: OutboundTransfer[][] = [];
  for (const [i, read] of reads.entries()) {
    if (read.status === "fulfilled") perPlace.push(read.value);
    else log.error("outbound_shard_unavailable", { purpose, ...placeForLog(places[i]!), error: read.reason });
  }
  const due = interleave(perPlace).slice(0, limit);
  // Batched, the lanes gather what is handed to them side by side into one transaction: one at a time would send each alone.
  const atOnce = pass.atOnce ?? (x.settlementBatch ? BATCHED_AT_ONCE : 1);
  const cron = { ...pass, cron: true };
  for (let i = 0; i < due.length; i += atOnce) {
    const group = due.slice(i, i + atOnce);
    // Left for the next run, where they are the oldest due (ORDER BY updated_at) and go first.
    if (!roomFor(times(STEP_COST, group.length), `outbound_${purpose}`, { left: due.length - i })) break;
    const steps = await Promise.allSettled(group.map((t) => step(env, x, t, complete, now, cron)));
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

/**
 * One step's worst case. D1: the resend's turn or the hand-over mark (1), the owner's row read and its
 * outcome's batch (2 statements), and one round of the outcome's fan-out (`dispatchOutbox`: forward 3,
 * fan-out 3, the check for more 1). Subrequests: the chain's word on a handed-over authorization
 * (its fate 2, the receipt 1, the expiry batch 1), the check batch (1), the lane's send (1), the
 * receipt of the send (JUST_SENT_RECEIPT_READS at most), the ledger's commit (1) and the deliveries'
 * queue send (1), and 2 to spare for a fate read in windows.
 */
export const STEP_COST = { d1Queries: 10, subrequests: 10 + JUST_SENT_RECEIPT_READS } as const;

/** Transfers the cron steps side by side when they are sent in settlement batches: one batch's worth, or two lanes'. */
export const BATCHED_AT_ONCE = 10;

/** The most transfers of one purpose stepped in one run, unless the pass says otherwise. */
export const DUE_PER_RUN = 25;

/** The first of each list, then the second of each, and so on. */
function interleave<T>(lists: T[][]): T[] {
  const out: T[] = [];
  const longest = Math.max(0, ...lists.map((l) => l.length));
  for (let i = 0; i < longest; i++) for (const list of lists) if (i < list.length) out.push(list[i]!);
  return out;
}
