import { decodeEventLog, encodeAbiParameters, encodeEventTopics, encodeFunctionData, type Hex, pad } from "viem";
import { shardField } from "../ledger/shard-labels";

/*
 * The AuditAnchor contract (contracts/AuditAnchor.sol) as the service sends to it and a verifier
 * reads it: `anchor(seq, head, rowsRoot)` emits `Anchored(by, seq, head, rowsRoot)`, with `by`
 * and `seq` indexed so the anchors of one sender, or of one seq, are found with eth_getLogs.
 */
export const AUDIT_ANCHOR_ABI = [
  {
    type: "event",
    name: "Anchored",
    inputs: [
      { name: "by", type: "address", indexed: true },
      { name: "seq", type: "uint256", indexed: true },
      { name: "head", type: "bytes32", indexed: false },
      { name: "rowsRoot", type: "bytes32", indexed: false },
    ],
  },
  {
    type: "function",
    name: "anchor",
    stateMutability: "nonpayable",
    inputs: [
      { name: "seq", type: "uint256" },
      { name: "head", type: "bytes32" },
      { name: "rowsRoot", type: "bytes32" },
    ],
    outputs: [],
  },
] as const;

/** A checkpoint as recorded on chain; hashes as 64 lowercase hex digits, like the audit rows'. */
export interface OnChainAnchor {
  seq: number;
  /** The ledger shard, for shard k ≥ 1 only (absent means shard 0, whose anchors are as they always were). */
  shard?: number;
  head: string;
  rowsRoot: string;
  by: `0x${string}`;
  transaction: `0x${string}`;
  blockNumber: number;
}

const LOW_64 = (1n << 64n) - 1n;

/**
 * The `seq` an anchor of shard `shard`'s checkpoint sends: the shard in the bits above 64, so the
 * contract (one uint256) is unchanged and shard 0's anchors are the plain seq they always were.
 */
export const anchorSeqOf = (shard: number, seq: number): bigint => (BigInt(shard) << 64n) | BigInt(seq);

export const anchorCallData = (seq: number | bigint, head: string, rowsRoot: string): Hex =>
  encodeFunctionData({
    abi: AUDIT_ANCHOR_ABI,
    functionName: "anchor",
    args: [BigInt(seq), `0x${head}`, `0x${rowsRoot}`],
  });

const ANCHORED_TOPIC = encodeEventTopics({ abi: AUDIT_ANCHOR_ABI, eventName: "Anchored" })[0]!;

/**
 * The eth_getLogs filter of the anchors `senders` sent to `contract`, of one `seq` or of all.
 * Topics: the event, then `by` (any of the senders), then `seq`. The blocks are the search's
 * (src/chain/logs.ts): windows within the provider's range cap, from a recorded block.
 */
export function anchoredLogsFilter(contract: `0x${string}`, senders: readonly `0x${string}`[], seq?: number | bigint) {
  const topics: (Hex | Hex[] | null)[] = [ANCHORED_TOPIC, senders.map((s) => pad(s.toLowerCase() as Hex))];
  if (seq !== undefined) topics.push(encodeAbiParameters([{ type: "uint256" }], [BigInt(seq)]));
  return { address: contract, topics };
}

interface RpcLog {
  address: string;
  topics: Hex[];
  data: Hex;
  transactionHash: Hex | null;
  blockNumber: Hex | bigint | null;
  removed?: boolean;
}

/** The anchors among `logs` (a receipt's, or eth_getLogs' answer) that `contract` emitted; others are skipped. */
export function anchorsIn(logs: readonly RpcLog[], contract: `0x${string}`): OnChainAnchor[] {
  const anchors: OnChainAnchor[] = [];
  for (const log of logs) {
    if (log.removed || log.address.toLowerCase() !== contract.toLowerCase()) continue;
    if (log.topics[0] !== ANCHORED_TOPIC || !log.transactionHash || log.blockNumber === null) continue;
    try {
      const { args } = decodeEventLog({
        abi: AUDIT_ANCHOR_ABI,
        eventName: "Anchored",
        topics: log.topics as [Hex, ...Hex[]],
        data: log.data,
      });
      const shard = Number(args.seq >> 64n);
      anchors.push({
        seq: Number(args.seq & LOW_64),
        ...shardField(shard),
        head: args.head.slice(2).toLowerCase(),
        rowsRoot: args.rowsRoot.slice(2).toLowerCase(),
        by: args.by.toLowerCase() as `0x${string}`,
        transaction: log.transactionHash,
        blockNumber: Number(log.blockNumber),
      });
    } catch {
      // Not an Anchored event of this ABI: nothing this contract emits, so nothing to read.
    }
  }
  return anchors;
}
