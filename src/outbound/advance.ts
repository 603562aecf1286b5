import type { Hex } from "viem";
import {
  movedBy,
  type RpcAnswer,
  receiptNow,
  receiptOfJustSent,
  receiptWithin,
  rpcBatch,
  rpcErrorMessage,
  shortError,
  tokenCall,
} from "../chain/client";
import { authorizationFate } from "../chain/logs";
import type { Env, X402Settings } from "../config/env";
import { guard, type SqlStatement, sqlStatement } from "../db/statements";
import { placeOfMadeId } from "../ledger/made-places";
import { placementOf } from "../ledger/place";
import { faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { laneOf } from "../x402/settler.do";
import { blockNumberOf, feeCalls, feesFrom, gasAccountOf, type PreparedTransfer } from "../x402/transfer";
import { CLOCK_SKEW_SECONDS } from "../x402/verify";
import { OUTBOUND_SELECT, type OutboundPurpose, type OutboundTransfer, signedTransferCall } from "./authorization";

/** Where an outbound transfer stands after one step. */
export type Advance =
  | { kind: "confirmed"; transaction: Hex }
  /**
   * Definitive: nothing moved and nothing ever will. `unsent`: decided before the authorization was
   * ever handed to the chain (its failure is recorded only while that still holds); otherwise
   * the chain showed it expired unused.
   */
  | { kind: "failed"; reason: string; unsent: boolean }
  /** Not decided: sent and not yet seen, the chain unreachable, or another worker on it. */
  | { kind: "waiting"; reason: string };

/** The refusal of an outcome's batch when another worker recorded the transfer's outcome first. */
export const OUTCOME_RECORDED = "outbound_transfer_decided";

/** How long a sent transfer rests before a worker looks at the chain and may hand it over again. */
export const RESEND_AFTER_MS = 30_000;

const waiting = (reason: string): Advance => ({ kind: "waiting", reason });

/**
 * How a step reads the receipt of what it sent: `wait` polls it up to the facilitator's timeout (a
 * request answering its caller); `now` reads it once (the cron, whose next run looks again, so no
 * run spends 30 s and a hundred calls on one transfer).
 */
export type ReceiptRead = "wait" | "now";

/**
 * Takes one step with an outbound transfer. The first time (never handed over): reads the
 * sender's balance and runs the transfer (its gas estimate executes it) and, if it would not go
 * through, fails it unsent; otherwise marks it handed over, then a gas key's settler lane sends
 * it and its receipt is read: awaited up to the facilitator's timeout on a request's path
 * (`receipt: "wait"`), read for at most a second by the cron (`"now"`), which leaves a transfer not
 * yet mined pending for its next run. With settlement batches configured, the lane sends it in its
 * next batch instead (`inBatch`). Later times (a lost answer, a crash, a revert, not yet mined): the chain
 * decides: the token marks the authorization used (confirmed with the transaction that used it)
 * or expired unused (failed); still valid and unused, the same signed authorization is handed over
 * again, which can move the money at most once, since the token refuses a used nonce.
 */
export async function advanceOutbound(
  env: Env,
  x: X402Settings,
  t: OutboundTransfer,
  now = Date.now(),
  receipt: ReceiptRead = "wait",
): Promise<Advance> {
  if (t.status !== "pending") return waiting(`already ${t.status}`);
  // An authorization names its token: sent on another (X402_ASSET changed, a local chain whose token was
  // deployed again), its nonce is unused there and it would pay a second time. An operator must decide.
  if (t.asset !== x.asset.toLowerCase() || t.network !== x.network) {
    log.error("outbound_asset_changed", { id: t.id, purpose: t.purpose, asset: t.asset, configured: x.asset });
    return waiting("asset_changed");
  }
  const lanes = x.facilitatorPrivateKeys.map((key) => gasAccountOf(key).address);
  if (lanes.length === 0) return waiting("no_gas_key");
  if (t.broadcastAt !== null) {
    const decided = await decidedOnChain(x, t, now);
    if (decided) return decided;
    // Unused and still valid: this worker hands it over again, if no other took the turn.
    if (!(await claimTurn(env, t, now))) return waiting("another worker has it");
  }
  const data = await signedTransferCall(x, t);
  if (!data) return waiting("signer_key_missing");
  const check = await checkOutbound(x, t, data, lanes[0]!);
  if (check.kind === "unavailable") return waiting(check.reason);
  if (check.kind === "used") return (await decidedOnChain(x, t, now)) ?? waiting("authorization used, not yet seen");
  if (check.kind === "refused") {
    return t.broadcastAt === null ? { kind: "failed", reason: check.reason, unsent: true } : waiting(check.reason);
  }
  if (t.broadcastAt === null && !(await markHandedOver(env, t, now, check.block)))
    return waiting("another worker has it");
  // A crash here leaves a row marked handed over that the chain never saw: the chain must decide it, not the mark.
  faultPoint("outbound.before_send");
  const lane = lanes[laneIndex(t.id, lanes.length)]!;
  if (x.settlementBatch) return inBatch(env, t, check.prepared, lane);
  const sent = await laneOf(env, lane).broadcast(check.prepared, lane);
  faultPoint("outbound.after_send");
  if (sent.kind !== "sent") return waiting(sent.reason);
  try {
    const mined =
      receipt === "wait"
        ? await receiptWithin(x, sent.transaction, x.facilitatorTimeoutMs)
        : await receiptOfJustSent(x, sent.transaction);
    // Not mined yet: the row stays handed over, and a later run asks the chain what became of it.
    if (!mined) return waiting("receipt_pending");
    if (movedBy(x, mined, transferOf(t))) return { kind: "confirmed", transaction: sent.transaction };
    // Reverted (the balance went between the check and the block): the authorization is unused and can go again.
    return waiting("transaction_reverted");
  } catch (error) {
    return waiting(`receipt_unavailable: ${shortError(error)}`);
  }
}

/**
 * Sends a transfer marked handed over in its lane's next settlement batch (X402_SETTLEMENT_BATCH_ADDRESS),
 * beside x402 settlements and other transfers handed to the lane meanwhile, and answers its own
 * outcome, read from the batch's receipt by the lane (the token's AuthorizationUsed for this nonce,
 * and a Transfer of exactly its value to its payee). Several transfers share the one transaction's
 * hash. The lane reads the receipt once for the whole batch, so the cron waits for it as a request
 * does (`ReceiptRead` does not apply): its next run asks the chain about any it could not tell.
 */
async function inBatch(env: Env, t: OutboundTransfer, prepared: PreparedTransfer, lane: Hex): Promise<Advance> {
  const item = { ...prepared, from: t.fromAddress, nonce: t.nonce, moves: { to: t.toAddress, value: BigInt(t.value) } };
  const outcome = await laneOf(env, lane)
    .settleInBatch(item, lane)
    .catch((error: unknown) => ({ kind: "unknown", reason: `settler_unreachable: ${shortError(error)}` }) as const);
  faultPoint("outbound.after_send");
  if (outcome.kind === "settled") return { kind: "confirmed", transaction: outcome.transaction };
  // Failed inside a mined batch (the balance went between the check and the block), or never sent: the
  // authorization is unused and can go again. Unknown: the chain decides (decidedOnChain, the next run).
  return waiting(outcome.reason);
}

const transferOf = (t: OutboundTransfer) => ({ from: t.fromAddress, to: t.toAddress, value: BigInt(t.value) });

/**
 * Which gas key's lane sends a transfer: fixed by its id, so its resends queue behind each other (and,
 * batched, go in the same lane's same or a later batch, never racing the first on another key). The
 * ids spread transfers evenly over the lanes, and each lane gathers its share into its own batches.
 */
function laneIndex(id: string, lanes: number): number {
  let h = 0;
  for (const ch of id) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return h % lanes;
}

/**
 * What the chain has decided about a transfer that was handed over: used by a transaction that
 * moved its value (confirmed), expired unused or canceled (failed), or null while undecided.
 */
async function decidedOnChain(x: X402Settings, t: OutboundTransfer, now: number): Promise<Advance | null> {
  // From the head recorded at the first hand-over: nothing could use the authorization before. A refused
  // search is logged by the chain client; the transfer waits for the next run either way.
  const fate = await authorizationFate(x, t.fromAddress, t.nonce, t.sentBlock).catch(() => null);
  if (fate === null) return waiting("chain_unavailable");
  if (fate.kind === "canceled") return { kind: "failed", reason: "authorization_canceled", unsent: false };
  if (fate.kind === "used") {
    const receipt = await receiptNow(x, fate.transaction).catch(() => null);
    if (!receipt) return waiting("receipt_unavailable");
    if (movedBy(x, receipt, transferOf(t))) return { kind: "confirmed", transaction: fate.transaction };
    // Used without moving the value: a token that behaves otherwise than EIP-3009 says; an operator must look.
    return waiting("authorization_used_without_transfer");
  }
  if (t.validBefore + CLOCK_SKEW_SECONDS <= Math.floor(now / 1000) && (await expiredUnused(x, t)))
    return { kind: "failed", reason: "authorization_expired", unsent: false };
  return null;
}

/**
 * Whether the chain itself puts the authorization past use: unused (the logs lag the state on some
 * nodes, so the state decides) at a block whose timestamp has reached `validBefore`. The token
 * requires `block.timestamp < validBefore` and timestamps never go back, so no later block can
 * use it: only then may its money be given back. Our own clock alone could run ahead of the chain's.
 */
async function expiredUnused(x: X402Settings, t: OutboundTransfer): Promise<boolean> {
  const [state, block] = await rpcBatch(x, [
    tokenCall(x, "authorizationState", [t.fromAddress, t.nonce]),
    { method: "eth_getBlockByNumber", params: ["latest", false] },
  ]).catch(() => [undefined, undefined]);
  if (!state || state.error || !block || block.error) return false;
  const timestamp = (block.result as { timestamp?: string } | null)?.timestamp;
  return BigInt((state.result as string) || "0x0") === 0n && !!timestamp && BigInt(timestamp) >= BigInt(t.validBefore);
}

type OutboundCheck =
  /** `block`: the head the batch was read at (the latest block's number), recorded at the hand-over. */
  | { kind: "ready"; prepared: PreparedTransfer; block: number | null }
  | { kind: "used" }
  | { kind: "refused"; reason: string }
  | { kind: "unavailable"; reason: string };

const errorOf = (answer: RpcAnswer | undefined) => shortError(rpcErrorMessage(answer) ?? "no answer");

/**
 * In one JSON-RPC batch: the authorization still unused, the sender's balance, the transfer run
 * against the latest state (its gas estimate), and the fees. A sender holding too little is
 * `treasury_insufficient_funds`.
 */
async function checkOutbound(x: X402Settings, t: OutboundTransfer, data: Hex, gasFrom: Hex): Promise<OutboundCheck> {
  let answers: RpcAnswer[];
  try {
    answers = await rpcBatch(x, [
      tokenCall(x, "authorizationState", [t.fromAddress, t.nonce]),
      tokenCall(x, "balanceOf", [t.fromAddress]),
      { method: "eth_estimateGas", params: [{ from: gasFrom, to: x.asset, data }, "latest"] },
      ...feeCalls,
    ]);
  } catch (error) {
    return { kind: "unavailable", reason: `rpc_unavailable: ${shortError(error)}` };
  }
  const [used, balance, estimate, block, tip] = answers as [RpcAnswer, RpcAnswer, RpcAnswer, RpcAnswer, RpcAnswer];
  for (const answer of [used, balance, block, tip])
    if (answer.error) return { kind: "unavailable", reason: `rpc_error: ${errorOf(answer)}` };
  if (BigInt(used.result as string) !== 0n) return { kind: "used" };
  if (BigInt((balance.result as string) || "0x0") < BigInt(t.value))
    return { kind: "refused", reason: "treasury_insufficient_funds" };
  if (estimate.error) return { kind: "refused", reason: `simulation_failed: ${errorOf(estimate)}` };
  return {
    kind: "ready",
    prepared: { data, gas: BigInt(estimate.result as string), fees: feesFrom(block, tip) },
    block: blockNumberOf(block),
  };
}

/**
 * The database a transfer's row lives in: its owner's place, which its id names (it is recorded in
 * the batch that debits the owner). Every mark below is made there, so the guarantees of one row
 * (handed over once, one turn, one outcome) hold per shard as they do in one database.
 */
export const dbOfTransfer = (env: Env, t: Pick<OutboundTransfer, "id">) => placeOfMadeId(placementOf(env), t.id).db;

/**
 * Marks the first hand-over, with the head the check was read at (where a search for its use starts);
 * only one worker's mark lands, and a failed or confirmed row takes none.
 */
async function markHandedOver(env: Env, t: OutboundTransfer, now: number, block: number | null): Promise<boolean> {
  const at = nowIso(now);
  const result = await dbOfTransfer(env, t)
    .prepare(
      "UPDATE outbound_transfers SET broadcast_at = ?, sent_block = ?, updated_at = ? WHERE id = ? AND status = 'pending' AND broadcast_at IS NULL",
    )
    .bind(at, block, at, t.id)
    .run();
  return result.meta.changes === 1;
}

/** A resend's turn: the row unchanged since this worker read it. */
async function claimTurn(env: Env, t: OutboundTransfer, now: number): Promise<boolean> {
  const result = await dbOfTransfer(env, t)
    .prepare("UPDATE outbound_transfers SET updated_at = ? WHERE id = ? AND status = 'pending' AND updated_at = ?")
    .bind(nowIso(now), t.id, t.updatedAt)
    .run();
  return result.meta.changes === 1;
}

/**
 * The guard and update that record a decided outcome, for the batch that also does what the
 * outcome means (a payout marked paid, a reversal): only a row still pending changes, and an
 * unsent failure only while the row was never handed over, so a worker that sent it meanwhile wins.
 */
export function outboundOutcomeStatements(t: OutboundTransfer, outcome: Advance, at: string): SqlStatement[] {
  if (outcome.kind === "waiting") throw new Error("a waiting transfer has no outcome to record");
  const stillOpen =
    outcome.kind === "failed" && outcome.unsent
      ? "EXISTS (SELECT 1 FROM outbound_transfers WHERE id = ? AND status = 'pending' AND broadcast_at IS NULL)"
      : "EXISTS (SELECT 1 FROM outbound_transfers WHERE id = ? AND status = 'pending')";
  return [
    guard(OUTCOME_RECORDED, stillOpen, t.id),
    outcome.kind === "confirmed"
      ? sqlStatement(
          "UPDATE outbound_transfers SET status = 'confirmed', tx_hash = ?, updated_at = ? WHERE id = ?",
          outcome.transaction,
          at,
          t.id,
        )
      : sqlStatement(
          "UPDATE outbound_transfers SET status = 'failed', failure_reason = ?, updated_at = ? WHERE id = ?",
          outcome.reason.slice(0, 300),
          at,
          t.id,
        ),
  ];
}

/**
 * The pending transfers of one purpose in one place's database a worker should look at now: not
 * touched for `RESEND_AFTER_MS` (never handed over because the request that made it stopped, or
 * handed over and not yet seen decided), oldest first.
 */
export async function dueOutbound(
  db: D1Database,
  purpose: OutboundPurpose,
  now = Date.now(),
  limit = 25,
  /** Also those never handed over, however fresh (a sweep has no request that sends it first). */
  withUnsent = false,
): Promise<OutboundTransfer[]> {
  const unsent = withUnsent ? "broadcast_at IS NULL OR " : "";
  const rows = await db
    .prepare(
      `${OUTBOUND_SELECT} WHERE status = 'pending' AND purpose = ? AND (${unsent}updated_at <= ?) ORDER BY updated_at LIMIT ?`,
    )
    .bind(purpose, nowIso(now - RESEND_AFTER_MS), limit)
    .all<OutboundTransfer>();
  return rows.results;
}

/** The transfer of one owner (a payout, a refund, a deposit), if it has one: in the owner's place, which its id names. */
export const outboundOf = (env: Env, purpose: OutboundPurpose, ownerId: string) =>
  placeOfMadeId(placementOf(env), ownerId)
    .db.prepare(`${OUTBOUND_SELECT} WHERE purpose = ? AND owner_id = ?`)
    .bind(purpose, ownerId)
    .first<OutboundTransfer>();
