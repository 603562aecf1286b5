import type { OnChainAnchor } from "../audit/anchor-abi";
import { fieldNamesShard, namesShard } from "../ledger/shard-labels";

/*
 * The on-chain part of an evidence file's check: the first anchor of the checkpoint on chain, among
 * those the verifier's trusted addresses sent to its anchor contract, must carry the head and root
 * the checkpoint signed, and every field of the file that says where and by whom it was anchored
 * must be that anchor's. Which anchor is the checkpoint's comes from the signed payload (its shard
 * and seq), never from the file's unsigned copies.
 */

/** Where a checkpoint's anchor is: its ledger shard (0 when the signed payload names none) and its seq. */
export interface AnchorAt {
  shard: number;
  seq: number;
}

/**
 * The anchors the verifier read from the chain: every `Anchored` event its trusted senders sent to its
 * anchor contract, as a list (more than the checkpoint's is fine: only its shard and seq count) or read
 * on demand for the shard and seq the checkpoint signed.
 */
export type AnchorsRead = readonly OnChainAnchor[] | ((at: AnchorAt) => Promise<readonly OnChainAnchor[]>);

/** The chain as the verifier knows it; each field given is checked against the file's. */
export interface ChainTrust {
  anchors: AnchorsRead;
  /** The id of the chain the anchors were read from. */
  chainId?: number;
  /** The anchor contract the verifier trusts. */
  contract?: string;
}

/** What the checkpoint's signature vouches for. */
export interface SignedHead extends AnchorAt {
  hash: string;
  rowsRoot: string;
}

/** The file's unsigned claims about the anchor. */
export interface AnchorClaims {
  checkpoint: { transaction: string | null; blockNumber: number | null; anchoredBy: string | null };
  anchor: { chainId: number; network: string; contract: string } | null;
}

const show = (value: unknown) => (value === null || value === undefined ? "none" : String(value));
const lower = (value: string | null | undefined) => value?.toLowerCase() ?? null;

export const checkpointName = ({ shard, seq }: AnchorAt) =>
  namesShard(shard) ? `shard ${shard}'s checkpoint ${seq}` : `checkpoint ${seq}`;

/** Where a signed head's anchor is, and nothing else of it: what a verifier reads the chain for. */
const anchorAt = ({ shard, seq }: AnchorAt): AnchorAt => ({ shard, seq });

/** The first anchor of `at` among `anchors`: the earlier block counts, a later one cannot rewrite it. */
export const firstAnchorOf = (anchors: readonly OnChainAnchor[], at: AnchorAt) =>
  [...anchors]
    .filter((a) => a.seq === at.seq && fieldNamesShard(a.shard, at.shard))
    .sort((a, b) => a.blockNumber - b.blockNumber)[0];

/** Whether the file's anchor claims hold on the chain the verifier read; the detail names each field that does not. */
export async function checkOnChain(
  file: AnchorClaims,
  signed: SignedHead,
  chain: ChainTrust,
): Promise<[boolean, string]> {
  const cp = file.checkpoint;
  const name = checkpointName(signed);
  if (cp.transaction === null)
    return [false, `checkpoint.transaction: the file names none (${name} was not on chain when the file was made)`];
  const wrong: string[] = [];
  if (chain.chainId !== undefined && file.anchor?.chainId !== chain.chainId)
    wrong.push(`anchor.chainId: the file says ${show(file.anchor?.chainId)}, the chain read is ${chain.chainId}`);
  if (chain.contract !== undefined && lower(file.anchor?.contract) !== lower(chain.contract))
    wrong.push(
      `anchor.contract: the file says ${show(file.anchor?.contract)}, the trusted anchor contract is ${chain.contract}`,
    );
  const read = typeof chain.anchors === "function" ? await chain.anchors(anchorAt(signed)) : chain.anchors;
  const first = firstAnchorOf(read, signed);
  if (!first) {
    wrong.push(
      `checkpoint.transaction: the file says ${cp.transaction}, but no anchor of ${name} from the trusted addresses is on chain`,
    );
    return [false, wrong.join("; ")];
  }
  const by = `the first anchor of ${name} on chain (${first.transaction})`;
  if (first.head !== signed.hash) wrong.push(`checkpoint.hash: signed ${signed.hash}, ${by} carries ${first.head}`);
  if (first.rowsRoot !== signed.rowsRoot)
    wrong.push(`checkpoint.rowsRoot: signed ${signed.rowsRoot}, ${by} carries ${first.rowsRoot}`);
  if (lower(cp.transaction) !== lower(first.transaction))
    wrong.push(
      `checkpoint.transaction: the file says ${cp.transaction}, the first anchor on chain is ${first.transaction}`,
    );
  if (cp.blockNumber !== first.blockNumber)
    wrong.push(
      `checkpoint.blockNumber: the file says ${show(cp.blockNumber)}, the first anchor on chain is in block ${first.blockNumber}`,
    );
  if (lower(cp.anchoredBy) !== lower(first.by))
    wrong.push(
      `checkpoint.anchoredBy: the file says ${show(cp.anchoredBy)}, the first anchor on chain was sent by ${first.by}`,
    );
  if (wrong.length > 0) return [false, wrong.join("; ")];
  return [true, `transaction ${first.transaction} (block ${first.blockNumber}) from ${first.by} anchors ${name}`];
}
