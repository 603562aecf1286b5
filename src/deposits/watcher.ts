import { agentsWithDepositAddresses } from "../agents/deposit-address";
import { walletOf } from "../agents/wallet.do";
import { EIP3009_ABI, publicClientOf } from "../chain/client";
import type { Env, X402Settings } from "../config/env";
import { settingsOf } from "../config/env";
import { screenAddress } from "../kyt/screening";
import type { DepositTransfer } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { nowIso } from "../lib/time";

/** Blocks read per pass; a long backlog is caught up over several cron runs. */
const MAX_RANGE = 2_000n;
/** Where a watcher with no cursor starts, counting back from the safe head. */
const INITIAL_LOOKBACK = 10_000n;

export interface WatchResult {
  fromBlock: number | null;
  toBlock: number | null;
  credited: number;
  blocked: number;
}

const cursorName = (x: X402Settings) => `deposits:${x.network}:${x.asset.toLowerCase()}`;

/**
 * Reads the token's Transfer logs to agent deposit addresses, up to the block
 * with the configured number of confirmations, and credits each transfer
 * once (keyed by transaction hash and log index). A reorg shallower than the
 * confirmation depth never reaches us; re-reading a range credits nothing twice.
 */
export async function watchDeposits(env: Env): Promise<WatchResult> {
  const x = settingsOf(env).x402;
  const result: WatchResult = { fromBlock: null, toBlock: null, credited: 0, blocked: 0 };
  if (!x) return result;
  const client = publicClientOf(x);
  const head = await client.getBlockNumber();
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
  const from =
    cursor && !restarted ? BigInt(cursor.blockNumber) + 1n : safe > INITIAL_LOOKBACK ? safe - INITIAL_LOOKBACK : 0n;
  if (from > safe) return result;
  const to = from + MAX_RANGE - 1n < safe ? from + MAX_RANGE - 1n : safe;
  result.fromBlock = Number(from);
  result.toBlock = Number(to);

  const agents = await agentsWithDepositAddresses(control);
  const byAddress = new Map(agents.map((a) => [a.address.toLowerCase(), a.id]));
  if (byAddress.size > 0) {
    const addresses = [...byAddress.keys()] as `0x${string}`[];
    for (let i = 0; i < addresses.length; i += 100) {
      const logs = await client.getContractEvents({
        address: x.asset,
        abi: EIP3009_ABI,
        eventName: "Transfer",
        args: { to: addresses.slice(i, i + 100) },
        fromBlock: from,
        toBlock: to,
      });
      for (const log of logs) {
        const address = log.args.to!.toLowerCase();
        const agentId = byAddress.get(address);
        if (!agentId || log.transactionHash === null || log.logIndex === null || log.blockNumber === null) continue;
        const transfer: DepositTransfer = {
          network: x.network,
          txHash: log.transactionHash.toLowerCase(),
          logIndex: log.logIndex,
          blockNumber: Number(log.blockNumber),
          agentId,
          address,
          sender: log.args.from!.toLowerCase(),
          value: log.args.value!.toString(),
        };
        const screened = await screenAddress(control, transfer.sender);
        const outcome = await walletOf(env, agentId).creditDeposit(transfer, screened.verdict === "pass");
        if (outcome === "credited") result.credited++;
        if (outcome === "blocked") result.blocked++;
      }
    }
  }
  await control
    .prepare(
      "INSERT INTO chain_cursors (name, block_number, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET block_number = excluded.block_number, updated_at = excluded.updated_at",
    )
    .bind(cursorName(x), Number(to), nowIso())
    .run();
  return result;
}
