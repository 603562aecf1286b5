import type { Hex } from "viem";
import { anchorCallData, anchoredLogsFilter, anchorSeqOf, anchorsIn, type OnChainAnchor } from "../audit/anchor-abi";
import {
  type Checkpoint,
  checkpointAt,
  claimAnchorResend,
  confirmAnchor,
  markAnchorFailed,
  markAnchorHandedOver,
  recordAnchorSent,
  unanchoredCheckpoints,
} from "../audit/checkpoint-rows";
import {
  JUST_SENT_RECEIPT_READS,
  type RpcAnswer,
  receiptNow,
  receiptOfJustSent,
  receiptWithin,
  rpcBatch,
  rpcCall,
  rpcErrorMessage,
  shortError,
} from "../chain/client";
import { searchLogs, searchStart } from "../chain/logs";
import type { Env, X402Settings } from "../config/env";
import { settingsOf } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { fieldNamesShard, shardField } from "../ledger/shard-labels";
import { faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { roomFor } from "../lib/room";
import { laneOf } from "../x402/settler.do";
import { blockNumberOf, feeCalls, feesFrom, gasAccountOf } from "../x402/transfer";
import { makeCheckpoint } from "./checkpoints";

/*
 * Recording a checkpoint on chain (the AuditAnchor contract's `Anchored` event), at most once across
 * crashes, as src/outbound/advance.ts does for transfers: `broadcast_at` is marked (guarded) before
 * the first send, the transaction is recorded once the lane has sent it, and `confirmed` with its
 * block once the receipt is in. An unknown outcome (a crash after the mark) is settled from the
 * chain: an `Anchored` event with the checkpoint's seq from one of the service's gas addresses
 * confirms it; only when none exists a while later is it sent again.
 */

/** How long a handed-over anchor rests before a worker looks for it on chain and may send it again. */
export const ANCHOR_RESEND_AFTER_MS = 60_000;

export type AnchorStep =
  | { kind: "confirmed"; transaction: Hex; blockNumber: number }
  | { kind: "waiting"; reason: string }
  /** No anchor contract or no gas key: the checkpoint stays signed and pending. */
  | { kind: "not_configured"; reason: string };

const waiting = (reason: string): AnchorStep => ({ kind: "waiting", reason });

interface Anchoring {
  x: X402Settings;
  contract: `0x${string}`;
  lanes: `0x${string}`[];
}

/** The chain, contract and gas addresses anchors go through, or why there are none. */
export function anchoringOf(env: Env): Anchoring | string {
  const settings = settingsOf(env);
  if (!settings.auditAnchor) return "AUDIT_ANCHOR_ADDRESS is not set";
  const x = settings.x402;
  // As the lanes name their keys (checksummed): a lane sends only for its own address.
  const lanes = x?.facilitatorPrivateKeys.map((key) => gasAccountOf(key).address) ?? [];
  if (!x || lanes.length === 0) return "no gas key (FACILITATOR_PRIVATE_KEY) to send anchors with";
  return { x, contract: settings.auditAnchor, lanes };
}

const matches = (a: OnChainAnchor, cp: Checkpoint) => a.head === cp.hash && a.rowsRoot === cp.rowsRoot;

/** Whether an anchor on chain is of shard `shard`'s checkpoint `seq`. */
const isOf = (a: OnChainAnchor, shard: number, seq: number) => a.seq === seq && fieldNamesShard(a.shard, shard);

/**
 * Takes one step with a checkpoint's anchor; see the comment at the top. `at` is the place whose chain
 * the checkpoint is of (control's unless named): its row is updated in that place's database, and its
 * anchor carries the shard's number above the seq's 64 bits (anchorSeqOf). The receipt of a send is
 * awaited up to the facilitator's timeout for a request (`receipt: "wait"`) and for at most a second by
 * the cron (`"now"`): not mined yet, the anchor stays sent and the next run reads its receipt again.
 */
export async function anchorCheckpoint(
  env: Env,
  cp: Checkpoint,
  now = Date.now(),
  at: Place = placementOf(env).control,
  receipt: "wait" | "now" = "wait",
): Promise<AnchorStep> {
  if (cp.anchorStatus === "confirmed")
    return { kind: "confirmed", transaction: cp.txHash!, blockNumber: cp.blockNumber! };
  // The number the anchors on chain carry (and the anchors of this checkpoint are looked for by).
  const { db, shard } = at;
  const anchoring = anchoringOf(env);
  if (typeof anchoring === "string") return { kind: "not_configured", reason: anchoring };
  const { x, contract, lanes } = anchoring;
  const handedOver = cp.broadcastAt !== null && cp.anchorStatus !== "failed";
  if (handedOver) {
    if (cp.txHash) {
      const receipt = await receiptNow(x, cp.txHash).catch(() => undefined);
      if (receipt === undefined) return waiting("chain_unavailable");
      if (receipt?.status === "reverted") {
        await markAnchorFailed(db, cp, now);
        return waiting("transaction_reverted");
      }
      if (receipt) {
        const found = anchorsIn(receipt.logs, contract).find((a) => isOf(a, shard, cp.seq) && matches(a, cp));
        if (found) return confirm(db, cp, found, now);
      }
    }
    // Another worker (or the request that sent it) may still be on it; after a while the chain decides.
    if (Date.parse(cp.updatedAt) > now - ANCHOR_RESEND_AFTER_MS) return waiting("sent recently");
    const onChain = await anchorsOnChain(anchoring, shard, cp).catch(() => undefined);
    if (onChain === undefined) return waiting("chain_unavailable");
    const found = onChain.find((a) => matches(a, cp));
    if (found) return confirm(db, cp, found, now);
    if (onChain.length > 0) return conflicting(cp, shard, onChain);
    // A transaction still waiting to be mined would land beside a second one: wait for the chain.
    const pending = await stillUnmined(x, cp).catch(() => undefined);
    if (pending !== false) return waiting(pending ? "still_in_mempool" : "chain_unavailable");
    if (!(await claimAnchorResend(db, cp, now))) return waiting("another worker has it");
  }
  const lane = lanes[cp.seq % lanes.length]!;
  const data = anchorCallData(anchorSeqOf(shard, cp.seq), cp.hash, cp.rowsRoot);
  const prepared = await prepareAnchor(x, contract, data, lane);
  if (typeof prepared === "string") return waiting(prepared);
  if (!handedOver && !(await markAnchorHandedOver(db, cp, lane, now, prepared.block)))
    return waiting("another worker has it");
  // A crash here leaves a mark the chain never saw: the chain decides it a while later, not the mark.
  faultPoint("checkpoint.before_send");
  const sent = await laneOf(env, lane).broadcast({ to: contract, ...prepared.transfer }, lane);
  faultPoint("checkpoint.after_send");
  if (sent.kind === "rejected") {
    // Nothing left the lane: it can go again at once.
    await markAnchorFailed(db, cp, Date.now());
    return waiting(sent.reason);
  }
  if (sent.kind === "unknown") return waiting(sent.reason);
  await recordAnchorSent(db, cp, sent.transaction, Date.now());
  try {
    const mined =
      receipt === "wait"
        ? await receiptWithin(x, sent.transaction, x.facilitatorTimeoutMs)
        : await receiptOfJustSent(x, sent.transaction);
    if (!mined) return waiting("sent recently");
    const found = anchorsIn(mined.logs, contract).find((a) => isOf(a, shard, cp.seq) && matches(a, cp));
    if (mined.status === "success" && found) return confirm(db, cp, found, Date.now());
    await markAnchorFailed(db, cp, Date.now());
    return waiting("transaction_reverted");
  } catch (error) {
    return waiting(`receipt_unavailable: ${shortError(error)}`);
  }
}

/**
 * Whether the anchor handed over may still be mined: its transaction known to the node and not in a
 * block; or, with no transaction recorded (a crash between the mark and the record), anything of
 * its lane's key still unmined (it may be the anchor). Resending is safe only when neither holds.
 */
async function stillUnmined(x: X402Settings, cp: Checkpoint): Promise<boolean> {
  if (cp.txHash) {
    const tx = await rpcCall<{ blockNumber: string | null } | null>(x, "eth_getTransactionByHash", [cp.txHash]);
    return tx !== null && tx.blockNumber === null;
  }
  if (!cp.anchorFrom) return false;
  const [pending, mined] = await Promise.all(
    ["pending", "latest"].map((tag) => rpcCall<string>(x, "eth_getTransactionCount", [cp.anchorFrom, tag])),
  );
  return BigInt(pending!) > BigInt(mined!);
}

/**
 * The anchors of shard `shard`'s checkpoint the service's gas addresses sent to the contract: searched
 * from the head recorded at its first hand-over (the start block for rows from before), window by
 * window, up to the first window that holds one. A refused search throws (logged by the chain client).
 */
async function anchorsOnChain({ x, contract, lanes }: Anchoring, shard: number, cp: Checkpoint) {
  const senders = new Set(lanes.map((lane) => lane.toLowerCase()));
  const ours = (logs: Parameters<typeof anchorsIn>[0]) =>
    anchorsIn(logs, contract).filter((a) => isOf(a, shard, cp.seq) && senders.has(a.by));
  const filter = anchoredLogsFilter(contract, lanes, anchorSeqOf(shard, cp.seq));
  const logs = await searchLogs(x, filter, searchStart(x, cp.sentBlock), { found: (part) => ours(part).length > 0 });
  return ours(logs);
}

/** An anchor of this seq from the service's own keys that says otherwise: D1 or the chain was changed; an operator must look. */
function conflicting(cp: Checkpoint, shard: number, onChain: OnChainAnchor[]): AnchorStep {
  log.error("audit_anchor_conflict", {
    ...shardField(shard),
    seq: cp.seq,
    hash: cp.hash,
    rowsRoot: cp.rowsRoot,
    onChain: onChain.map((a) => ({ transaction: a.transaction, head: a.head, rowsRoot: a.rowsRoot })),
  });
  return waiting("conflicting_anchor_on_chain");
}

const errorOf = (answer: RpcAnswer | undefined) => shortError(rpcErrorMessage(answer) ?? "no answer");

/** The contract's presence, gas (the call run against the latest state) and fees, in one batch; a string says why not. */
async function prepareAnchor(x: X402Settings, contract: `0x${string}`, data: Hex, from: `0x${string}`) {
  let answers: RpcAnswer[];
  try {
    answers = await rpcBatch(x, [
      { method: "eth_getCode", params: [contract, "latest"] },
      { method: "eth_estimateGas", params: [{ from, to: contract, data }, "latest"] },
      ...feeCalls,
    ]);
  } catch (error) {
    return `rpc_unavailable: ${shortError(error)}`;
  }
  const [code, estimate, block, tip] = answers as [RpcAnswer, RpcAnswer, RpcAnswer, RpcAnswer];
  for (const answer of [code, estimate, block, tip]) if (answer.error) return `rpc_error: ${errorOf(answer)}`;
  // A call to an address without code succeeds and emits nothing: it would be paid for and sent again every run.
  if (!code.result || code.result === "0x") return "no contract at AUDIT_ANCHOR_ADDRESS";
  return {
    transfer: { data, gas: BigInt(estimate.result as string), fees: feesFrom(block, tip) },
    block: blockNumberOf(block),
  };
}

/** The anchor found on chain confirms the checkpoint: what is stored then is the step's answer. */
async function confirm(db: D1Database, cp: Checkpoint, anchor: OnChainAnchor, now: number): Promise<AnchorStep> {
  await confirmAnchor(db, cp, anchor, now);
  const stored = await checkpointAt(db, cp.seq);
  return { kind: "confirmed", transaction: stored!.txHash!, blockNumber: stored!.blockNumber! };
}

/**
 * The cron's job, for every ledger shard in turn: a checkpoint when the shard's head has moved since
 * its last one, then a step with each of its checkpoints not yet confirmed on chain, oldest first.
 * Without an anchor contract or a gas key that is said once per shard and run, and the checkpoints
 * stay signed and pending. One shard failing leaves the others checkpointed, and is thrown after.
 */
export async function auditCheckpointJob(env: Env, now = Date.now()): Promise<void> {
  const failures: unknown[] = [];
  // One shard after another: their anchors share the gas lanes, and a run is a handful of sends.
  for (const at of placementOf(env).each()) await checkpointShard(env, at, now).catch((error) => failures.push(error));
  if (failures.length > 0) throw failures[0];
}

/**
 * One anchor step's worst case. D1: the hand-over or resend mark, the sent record, the confirmation
 * and its read back (4). Subrequests: the sent transaction's receipt (1), the anchors on chain (1,
 * and 2 to spare for a search in windows), the mempool (2), the contract and fees batch (1), the
 * lane's send (1) and the receipt of the send (JUST_SENT_RECEIPT_READS at most).
 */
const ANCHOR_COST = { d1Queries: 4, subrequests: 8 + JUST_SENT_RECEIPT_READS } as const;

async function checkpointShard(env: Env, at: Place, now: number): Promise<void> {
  await makeCheckpoint(env, now, at);
  const due = await unanchoredCheckpoints(at.db, 10);
  if (due.length === 0) return;
  // The logs name the shard (control's name none, as before shards).
  const tag = shardField(at.shard);
  const anchoring = anchoringOf(env);
  if (typeof anchoring === "string") {
    log.warn("audit_anchor_not_configured", { ...tag, reason: anchoring, pending: due.length });
    return;
  }
  for (const cp of due) {
    // The rest stay pending, oldest first, for the next run.
    if (!roomFor(ANCHOR_COST, "audit_anchor", tag)) break;
    const step = await anchorCheckpoint(env, cp, now, at, "now").catch((error: unknown) => waiting(shortError(error)));
    if (step.kind === "waiting" && step.reason !== "sent recently")
      log.warn("audit_anchor_waiting", { ...tag, seq: cp.seq, reason: step.reason });
  }
}
