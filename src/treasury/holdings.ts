import { toHex } from "viem";
import { rpcCall, tokenBalancesAt } from "../chain/client";
import type { X402Settings } from "../config/env";
import { currentInvocation } from "../lib/invocation";

/** What the service holds on chain at one block, in token base units. */
export interface Holdings {
  asOfBlock: number;
  settlementBaseUnits: bigint;
  /** The receiving addresses (deposit, charge and link addresses) not swept yet, together. */
  depositAddressesBaseUnits: bigint;
  totalBaseUnits: bigint;
  /** How many receiving addresses were read besides the settlement address. */
  addressesRead: number;
}

/**
 * The token balances of the settlement address and of `receiving`, all at one block: the block
 * number is pinned first and every read names it, so a sweep mined between two reads is counted
 * once (on one side or the other), never twice or not at all. One JSON-RPC batch per RPC_MAX_BATCH
 * addresses. The sum means something only whole, so a read the invocation could not finish within
 * its subrequests is refused before it starts (an error the cron logs), never cut short.
 */
export async function readHoldings(x: X402Settings, receiving: readonly string[]): Promise<Holdings> {
  const requests = 1 + Math.ceil((receiving.length + 1) / x.maxBatch);
  if (!currentInvocation().left({ subrequests: requests }))
    throw new Error(
      `treasury check: ${receiving.length} unswept addresses need ${requests} requests, more than this invocation may still send`,
    );
  const block = BigInt(await rpcCall<string>(x, "eth_blockNumber", [], { retry: true }));
  const [settlement, ...others] = await tokenBalancesAt(x, [x.payTo, ...receiving], toHex(block));
  const depositAddresses = others.reduce((sum, b) => sum + b, 0n);
  return {
    asOfBlock: Number(block),
    settlementBaseUnits: settlement!,
    depositAddressesBaseUnits: depositAddresses,
    totalBaseUnits: settlement! + depositAddresses,
    addressesRead: receiving.length,
  };
}
