import { type Hex, toHex } from "viem";
import { walletOf } from "../../agents/wallet.do";
import {
  claimLook,
  type DueAgentX402Payment,
  dueAgentX402Payments,
  settleAgentX402Payment,
} from "../../agents/x402-life";
import { type RpcAnswer, rpcBatch, rpcCall, shortError, tokenCall } from "../../chain/client";
import { authorizationFate } from "../../chain/logs";
import { type Env, settingsOf, type X402Settings } from "../../config/env";
import { placeForLog } from "../../ledger/made-places";
import { placementOf } from "../../ledger/place";
import { X402_OUT_DECIDED } from "../../ledger/x402-out";
import { log } from "../../lib/log";
import { roomFor } from "../../lib/room";

/*
 * The reconciliation of agents' outbound x402 payments: each one still `authorized` is asked of the
 * chain, and ends `settled` (the token shows its authorization used: the transaction from the
 * token's AuthorizationUsed log) or `released` (past its window, unused, at a block the service
 * trusts: the debit is given back). Anything else waits for the next run.
 */

/** What the chain says of one authorized payment. */
export type PaymentFate =
  | { kind: "settled"; transaction: Hex }
  | { kind: "released"; reason: "authorization_expired" | "authorization_canceled" }
  | { kind: "waiting"; reason: string };

const waiting = (reason: string): PaymentFate => ({ kind: "waiting", reason });

/** Who signed the authorization the payment's header carries (the settlement address when it was signed). */
export function authorizerOf(headerValue: string): Hex | null {
  try {
    const from = JSON.parse(atob(headerValue))?.payload?.authorization?.from;
    return typeof from === "string" && /^0x[0-9a-fA-F]{40}$/.test(from) ? (from as Hex) : null;
  } catch {
    return null;
  }
}

const failed = (answer: RpcAnswer | undefined) => !answer || !!answer.error;

/**
 * What the chain says of `p`, judged at a block `depositConfirmations` behind the head (a block the
 * service trusts not to be replaced): its header and the authorization's state read at that very
 * block. Used there: the transaction from the token's log. Unused there with the block's own
 * timestamp at or past `validBefore`: released, since the token takes an authorization only while
 * `block.timestamp < validBefore` and no later block has an earlier timestamp. The service's clock is
 * never asked: it may run ahead of the chain's.
 */
export async function fateOf(x: X402Settings, p: DueAgentX402Payment): Promise<PaymentFate> {
  // An authorization names its token: read on another (X402_ASSET changed), it would look unused forever.
  if (p.asset.toLowerCase() !== x.asset.toLowerCase()) return waiting("asset_changed");
  const from = authorizerOf(p.headerValue);
  if (!from) return waiting("header_unreadable");
  let answers: RpcAnswer[];
  try {
    const head = BigInt(await rpcCall<string>(x, "eth_blockNumber", [], { retry: true }));
    const depth = BigInt(x.depositConfirmations);
    const at = toHex(head > depth ? head - depth : 0n);
    answers = await rpcBatch(x, [
      { method: "eth_getBlockByNumber", params: [at, false] },
      tokenCall(x, "authorizationState", [from, p.nonce], at),
    ]);
  } catch (error) {
    return waiting(`rpc_unavailable: ${shortError(error)}`);
  }
  const [block, state] = answers;
  if (failed(block) || failed(state)) return waiting("rpc_error");
  const timestamp = (block!.result as { timestamp?: string } | null)?.timestamp;
  if (!timestamp) return waiting("block_unavailable");
  if (BigInt((state!.result as string) || "0x0") === 0n)
    return BigInt(timestamp) >= BigInt(p.validBefore)
      ? { kind: "released", reason: "authorization_expired" }
      : waiting("window_open");
  // Used: the token's own log names the transaction (or a cancellation by the settlement key).
  const fate = await authorizationFate(x, from, p.nonce, p.recordedBlock).catch(() => null);
  if (fate === null) return waiting("logs_unavailable");
  if (fate.kind === "used") return { kind: "settled", transaction: fate.transaction };
  if (fate.kind === "canceled") return { kind: "released", reason: "authorization_canceled" };
  return waiting("used_not_yet_logged");
}

/** Where one payment stands after one look. */
export type LookResult = "settled" | "released" | "waiting" | "decided_elsewhere";

/**
 * One look at one authorized payment: the chain's word, and its outcome written once. A settle or
 * release that another worker wrote first is refused by its batch's guard (X402_OUT_DECIDED).
 */
export async function lookAt(env: Env, x: X402Settings, p: DueAgentX402Payment): Promise<LookResult> {
  const fate = await fateOf(x, p);
  if (fate.kind === "waiting") {
    log.info("agent_x402_payment_waiting", { id: p.id, reason: fate.reason });
    return "waiting";
  }
  const result =
    fate.kind === "settled"
      ? await settleAgentX402Payment(env, p, fate.transaction)
      : await walletOf(env, p.agentId).releaseX402(p, fate.reason);
  if (result.kind === "committed") return fate.kind;
  if (result.reason !== X402_OUT_DECIDED)
    log.error("agent_x402_payment_refused", { id: p.id, outcome: fate.kind, reason: result.reason });
  return "decided_elsewhere";
}

/**
 * One look's worst case. D1: the turn's mark (1), the outcome's batch (1), and one round of the
 * outcome's fan-out after the run (3, spread). Subrequests: the head (1), the block and state (1),
 * the log search (LOG_WINDOWS_PER_LOOK), the wallet's turn (1), the ledger's commit (1).
 */
const LOG_WINDOWS_PER_LOOK = 4;
export const LOOK_COST = { d1Queries: 5, subrequests: 4 + LOG_WINDOWS_PER_LOOK } as const;

/** The most payments looked at in one run, over the places the env walks. */
export const LOOKS_PER_RUN = 25;

/**
 * The cron's pass: the due authorized payments of every place the env walks (one, for the per-place
 * job), taken in turn across places, each looked at once if this run takes its turn, up to `limit`
 * and the invocation's room. Safe to run twice at once: a look's turn is taken by one run, and each
 * outcome's batch is guarded on `authorized`.
 */
export async function reconcileAgentX402Payments(
  env: Env,
  now = Date.now(),
  limit = LOOKS_PER_RUN,
): Promise<Record<LookResult, number> | null> {
  const x = settingsOf(env).x402;
  if (!x) return null;
  const counts: Record<LookResult, number> = { settled: 0, released: 0, waiting: 0, decided_elsewhere: 0 };
  const places = placementOf(env).each();
  const reads = await Promise.allSettled(places.map(({ db }) => dueAgentX402Payments(db, now, limit)));
  const perPlace: DueAgentX402Payment[][] = [];
  for (const [i, read] of reads.entries()) {
    if (read.status === "fulfilled") perPlace.push(read.value);
    else log.error("agent_x402_shard_unavailable", { ...placeForLog(places[i]!), error: read.reason });
  }
  const due = interleave(perPlace).slice(0, limit);
  for (const [i, p] of due.entries()) {
    if (!roomFor(LOOK_COST, "agent_x402_reconcile", { left: due.length - i })) break;
    if (!(await claimLook(env, p, now))) {
      counts.decided_elsewhere++;
      continue;
    }
    try {
      counts[await lookAt(env, x, p)]++;
    } catch (error) {
      counts.waiting++;
      log.warn("agent_x402_payment_look", { id: p.id, error });
    }
  }
  return counts;
}

/** The first of each list, then the second of each, and so on. */
function interleave<T>(lists: T[][]): T[] {
  const out: T[] = [];
  const longest = Math.max(0, ...lists.map((l) => l.length));
  for (let i = 0; i < longest; i++) for (const list of lists) if (i < list.length) out.push(list[i]!);
  return out;
}
