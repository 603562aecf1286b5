import { decodeEventLog, encodeEventTopics, type Hex } from "viem";
import { agentsAtDepositAddresses } from "../agents/deposit-address";
import { walletOf } from "../agents/wallet.do";
import { EIP3009_ABI, rpcCall } from "../chain/client";
import { getLogs, logWindows, type RpcLog } from "../chain/logs";
import type { Env, X402Settings } from "../config/env";
import { settingsOf } from "../config/env";
import { screenAddress } from "../kyt/screening";
import type { DepositTransfer } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { roomFor } from "../lib/room";
import { nowIso } from "../lib/time";

/** Where a watcher with no cursor starts, counting back from the safe head (never before CHAIN_START_BLOCK). */
const INITIAL_LOOKBACK = 10_000n;
/** Windows read in one run at most; a longer backlog is caught up over the next runs. */
const MAX_WINDOWS_PER_RUN = 10;
/** What one window may spend at least (its eth_getLogs; its lookups and credits): a run stops before. */
const WINDOW_NEEDS = { subrequests: 2, d1Queries: 4 };

const TRANSFER_TOPIC = encodeEventTopics({ abi: EIP3009_ABI, eventName: "Transfer" })[0]!;

export interface WatchResult {
  fromBlock: number | null;
  toBlock: number | null;
  credited: number;
  blocked: number;
}

const cursorName = (x: X402Settings) => `deposits:${x.network}:${x.asset.toLowerCase()}`;

/**
 * Reads the token's Transfer logs, window by window (at most RPC_MAX_LOG_RANGE blocks each, one
 * eth_getLogs per window whatever the number of agents), up to the block with the configured number
 * of confirmations; the recipients of each window are looked up among the deposit addresses, and each
 * transfer to one is credited once (keyed by transaction hash and log index). The cursor moves after
 * each window. A reorg shallower than the confirmation depth never reaches us; re-reading a range
 * credits nothing twice. A node that refuses the search is logged by the chain client and thrown:
 * the cursor stays, and the next run reads the same window.
 */
export async function watchDeposits(env: Env): Promise<WatchResult> {
  const x = settingsOf(env).x402;
  const result: WatchResult = { fromBlock: null, toBlock: null, credited: 0, blocked: 0 };
  if (!x) return result;
  const head = BigInt(await rpcCall<string>(x, "eth_blockNumber", [], { retry: true }));
  const confirmations = BigInt(x.depositConfirmations);
  const safe = head - (confirmations > 0n ? confirmations - 1n : 0n);
  if (safe < 0n) return result;
  const control = placementOf(env).control.db;
  const cursor = await control
    .prepare("SELECT block_number AS blockNumber FROM chain_cursors WHERE name = ?")
    .bind(cursorName(x))
    .first<{ blockNumber: number }>();
  // A cursor ahead of the chain means the chain was reset (a local chain restarted): read it again from the start.
  const restarted = cursor !== null && BigInt(cursor.blockNumber) > head;
  const from = cursor && !restarted ? BigInt(cursor.blockNumber) + 1n : firstBlock(x, safe);
  if (from > safe) return result;
  let windows = 0;
  for (const window of logWindows(from, safe, x.maxLogRange)) {
    if (windows++ >= MAX_WINDOWS_PER_RUN || !roomFor(WINDOW_NEEDS, "deposit_watch", { fromBlock: Number(window.from) }))
      break;
    const logs = await getLogs(x, { address: x.asset, topics: [TRANSFER_TOPIC] }, window.from, window.to);
    const outcome = await creditTransfers(env, x, control, logs);
    result.credited += outcome.credited;
    result.blocked += outcome.blocked;
    await control
      .prepare(
        "INSERT INTO chain_cursors (name, block_number, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET block_number = excluded.block_number, updated_at = excluded.updated_at",
      )
      .bind(cursorName(x), Number(window.to), nowIso())
      .run();
    result.fromBlock ??= Number(window.from);
    result.toBlock = Number(window.to);
  }
  return result;
}

/** Where a watcher without a cursor starts: a while back from the safe head, never before the deployment's start. */
function firstBlock(x: X402Settings, safe: bigint): bigint {
  const back = safe > INITIAL_LOOKBACK ? safe - INITIAL_LOOKBACK : 0n;
  const start = BigInt(x.startBlock);
  return back > start ? back : start;
}

/** A Transfer log of the token, decoded; null for anything else (a log the filter should not have matched). */
function transferOf(x: X402Settings, log: RpcLog) {
  if (log.removed || log.address.toLowerCase() !== x.asset.toLowerCase()) return null;
  if (log.transactionHash === null || log.logIndex === null || log.blockNumber === null) return null;
  try {
    const { args } = decodeEventLog({
      abi: EIP3009_ABI,
      eventName: "Transfer",
      topics: log.topics as [Hex, ...Hex[]],
      data: log.data,
    });
    return { ...args, log };
  } catch {
    return null;
  }
}

/** Credits the transfers among `logs` whose recipient is an agent's deposit address, each once. */
async function creditTransfers(env: Env, x: X402Settings, control: D1Database, logs: RpcLog[]) {
  const outcome = { credited: 0, blocked: 0 };
  const transfers = logs.map((log) => transferOf(x, log)).filter((t) => t !== null);
  if (transfers.length === 0) return outcome;
  const agents = await agentsAtDepositAddresses(
    control,
    transfers.map((t) => t.to.toLowerCase()),
  );
  for (const t of transfers) {
    const address = t.to.toLowerCase();
    const agentId = agents.get(address);
    if (!agentId) continue;
    const transfer: DepositTransfer = {
      network: x.network,
      txHash: t.log.transactionHash!.toLowerCase(),
      logIndex: Number(t.log.logIndex),
      blockNumber: Number(t.log.blockNumber),
      agentId,
      address,
      sender: t.from.toLowerCase(),
      value: t.value.toString(),
    };
    const screened = await screenAddress(control, transfer.sender);
    const credited = await walletOf(env, agentId).creditDeposit(transfer, screened.verdict === "pass");
    if (credited === "credited") outcome.credited++;
    if (credited === "blocked") outcome.blocked++;
  }
  return outcome;
}
