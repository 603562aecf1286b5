import type { JWK } from "jose";
import { type AuditRow, type ChainVerdict, genesisHashOf, verifyChain } from "../ledger/chain";
import { fieldNamesShard } from "../ledger/shard-labels";
import { verifyJws } from "../proofs/keys";
import type { OnChainAnchor } from "./anchor-abi";
import { merkleRoot } from "./merkle";

/*
 * The audit chain checked against its signed checkpoints and their anchors on chain, offline and
 * without trusting the service: the rows and checkpoints come from the service, the key set is the
 * published one, and the anchors are read from the chain by the verifier itself. The chain alone
 * cannot see rows removed from its end, nor a chain rewritten whole with fresh hashes; an anchor
 * made before either names a head the rows no longer have.
 */

/** The JWS `typ` of a checkpoint. */
export const CHECKPOINT_TYP = "agent-pay-checkpoint+jwt";

/** A checkpoint as the service lists it (GET /console/audit/checkpoints). */
export interface ListedCheckpoint {
  seq: number;
  hash: string;
  fromSeq: number;
  rowsRoot: string;
  signedAt: string;
  jws: string;
  transaction: string | null;
}

export type CheckpointProblemKind =
  /** The JWS does not verify with the published keys, or signs other fields than listed. */
  | "signature_invalid"
  /** The rows do not have the head, or the rows' Merkle root, the checkpoint signed. */
  | "checkpoint_contradicts_rows"
  /** An anchor on chain names a head the rows do not have (rows removed from the end, or rewritten). */
  | "anchor_contradicts_rows"
  /** The checkpoint and the anchor of its seq differ, or it names a transaction the chain has no anchor for. */
  | "checkpoint_contradicts_anchor"
  /** An anchor on chain whose checkpoint the service does not list. */
  | "checkpoint_missing"
  /** The service's keys anchored one seq twice, with different heads. */
  | "anchors_conflict";

export interface CheckpointProblem {
  kind: CheckpointProblemKind;
  seq: number;
  /** The anchoring transaction (the chain's, when there is one), or the checkpoint's claim, or null. */
  transaction: string | null;
  detail: string;
}

export interface CheckpointsVerdict {
  ok: boolean;
  chain: ChainVerdict;
  checkpoints: number;
  anchors: number;
  /** Checkpoints that are signed and match the rows but are not on chain yet (not a failure). */
  unanchored: number[];
  /** The latest checkpoint that matches both the rows and its anchor, or null. */
  latestAnchored: { seq: number; transaction: string } | null;
  problems: CheckpointProblem[];
}

/** Whether a checkpoint's signed payload differs from its fields, or names another shard (shard 0's name none). */
export const signsOtherFields = (
  p: Record<string, unknown>,
  cp: Pick<ListedCheckpoint, "seq" | "hash" | "fromSeq" | "rowsRoot" | "signedAt">,
  shard: number,
) =>
  p.seq !== cp.seq ||
  p.hash !== cp.hash ||
  p.fromSeq !== cp.fromSeq ||
  p.rowsRoot !== cp.rowsRoot ||
  p.signedAt !== cp.signedAt ||
  !fieldNamesShard(p.shard, shard);

interface Range {
  from: number;
  to: number;
  hashes: string[];
}

/** Reads the rows once, feeding the chain check and keeping only what the checkpoints and anchors need. */
async function readRows(
  rows: Iterable<AuditRow> | AsyncIterable<AuditRow>,
  ranges: Range[],
  heads: Set<number>,
  shard: number,
) {
  const source = (
    Symbol.asyncIterator in rows ? rows[Symbol.asyncIterator]() : (rows as Iterable<AuditRow>)[Symbol.iterator]()
  ) as AsyncIterator<AuditRow> | Iterator<AuditRow>;
  const rowHash = new Map<number, string>();
  let lastSeq = 0;
  const keep = (row: AuditRow) => {
    lastSeq = Math.max(lastSeq, row.seq);
    if (heads.has(row.seq)) rowHash.set(row.seq, row.hash);
    for (const range of ranges)
      if (row.seq >= range.from && row.seq <= range.to && row.seq === range.from + range.hashes.length)
        range.hashes.push(row.hash);
  };
  async function* tapped() {
    for (;;) {
      const next = await source.next();
      if (next.done) return;
      keep(next.value);
      yield next.value;
    }
  }
  const chain = await verifyChain(tapped(), { seq: 0, hash: genesisHashOf(shard) });
  // A broken chain stops the chain check at its first broken row; the rest is still read for the checkpoints.
  for (let next = await source.next(); !next.done; next = await source.next()) keep(next.value);
  return { chain, rowHash, lastSeq };
}

const short = (hash: string) => `${hash.slice(0, 12)}…`;

/** What is wrong with the rows at a head (`seq` should have hash `head`), or null when they have it. */
type RowsSay = (seq: number, head: string) => string | null;

const rowsSayer =
  (rowHash: Map<number, string>, lastSeq: number): RowsSay =>
  (seq, head) => {
    const hash = rowHash.get(seq);
    if (hash === undefined) return `the rows end at seq ${lastSeq}: rows removed from the end`;
    if (hash !== head) return `row ${seq} has hash ${short(hash)}, not ${short(head)}: the chain was rewritten`;
    return null;
  };

export async function verifyCheckpoints(input: {
  rows: Iterable<AuditRow> | AsyncIterable<AuditRow>;
  checkpoints: readonly ListedCheckpoint[];
  jwks: { keys: JWK[] };
  /**
   * The `Anchored` events of the anchor contract from the service's gas addresses, read from the
   * chain; null when the verifier has no chain to read (the anchors are then not checked at all).
   */
  anchors: readonly OnChainAnchor[] | null;
  /**
   * The ledger shard the rows and checkpoints are of (0 when absent): its chain starts from its own
   * genesis, its checkpoints sign its number (shard 0's sign none), and only its anchors count.
   */
  shard?: number;
}): Promise<CheckpointsVerdict> {
  const shard = input.shard ?? 0;
  const problems: CheckpointProblem[] = [];
  const checkpoints = [...input.checkpoints].sort((a, b) => a.seq - b.seq);
  const anchorOf = firstAnchors(input.anchors ?? [], shard, problems);
  const ranges = checkpoints.map((cp) => ({ from: cp.fromSeq, to: cp.seq, hashes: [] as string[] }));
  const heads = new Set([...checkpoints.map((cp) => cp.seq), ...anchorOf.keys()]);
  const { chain, rowHash, lastSeq } = await readRows(input.rows, ranges, heads, shard);
  const rowsSay = rowsSayer(rowHash, lastSeq);
  const against = { anchorOf, rowsSay, jwks: input.jwks, shard, checkAnchors: input.anchors !== null };
  const { unanchored, latestAnchored } = await checkEach(checkpoints, ranges, against, problems);
  checkAnchorsOnly(anchorOf, new Set(checkpoints.map((cp) => cp.seq)), rowsSay, problems);
  problems.sort((a, b) => a.seq - b.seq);
  return {
    ok: chain.ok && problems.length === 0,
    chain,
    checkpoints: checkpoints.length,
    anchors: anchorOf.size,
    unanchored,
    latestAnchored,
    problems,
  };
}

/**
 * The anchor of each seq that counts, of the shard's anchors: the earliest. A later one saying
 * otherwise is a conflict, added to `problems`.
 */
function firstAnchors(anchors: readonly OnChainAnchor[], shard: number, problems: CheckpointProblem[]) {
  const anchorOf = new Map<number, OnChainAnchor>();
  const ofShard = anchors.filter((a) => fieldNamesShard(a.shard, shard));
  for (const anchor of [...ofShard].sort((a, b) => a.blockNumber - b.blockNumber)) {
    const first = anchorOf.get(anchor.seq);
    if (!first) anchorOf.set(anchor.seq, anchor);
    else if (first.head !== anchor.head || first.rowsRoot !== anchor.rowsRoot)
      problems.push({
        kind: "anchors_conflict",
        seq: anchor.seq,
        transaction: anchor.transaction,
        detail: `anchored again with head ${short(anchor.head)} and rows root ${short(anchor.rowsRoot)} after ${first.transaction} anchored head ${short(first.head)} and rows root ${short(first.rowsRoot)}`,
      });
  }
  return anchorOf;
}

/** What each checkpoint is checked against: its anchor, the rows, the keys and the shard it must sign. */
interface Against {
  anchorOf: Map<number, OnChainAnchor>;
  rowsSay: RowsSay;
  jwks: { keys: JWK[] };
  shard: number;
  /** Whether the anchors were read: a checkpoint naming a transaction must then have its anchor. */
  checkAnchors: boolean;
}

/**
 * Checks each checkpoint, oldest first: its signature, the rows at its head and in its range, the one
 * before it, and its anchor. Adds what is wrong to `problems`; answers those that hold but are not on
 * chain yet, and the latest that holds and is.
 */
async function checkEach(checkpoints: ListedCheckpoint[], ranges: Range[], at: Against, problems: CheckpointProblem[]) {
  const unanchored: number[] = [];
  let latestAnchored: CheckpointsVerdict["latestAnchored"] = null;
  let previous = 0;
  for (const [i, cp] of checkpoints.entries()) {
    const anchor = at.anchorOf.get(cp.seq);
    const transaction = anchor?.transaction ?? cp.transaction;
    const problem = (kind: CheckpointProblemKind, detail: string) =>
      problems.push({ kind, seq: cp.seq, transaction, detail });
    const before = problems.length;
    const signed = await verifyJws(cp.jws, at.jwks, CHECKPOINT_TYP);
    if (!signed.ok) problem("signature_invalid", signed.reason);
    else {
      if (signsOtherFields(signed.payload, cp, at.shard))
        problem("signature_invalid", "the JWS signs other fields than the checkpoint lists");
    }
    const rows = at.rowsSay(cp.seq, cp.hash);
    if (rows) problem("checkpoint_contradicts_rows", rows);
    else if (cp.fromSeq !== previous + 1)
      problem(
        "checkpoint_contradicts_rows",
        `covers from seq ${cp.fromSeq}, but the checkpoint before ends at ${previous}`,
      );
    else {
      const range = ranges[i]!;
      if (range.hashes.length !== cp.seq - cp.fromSeq + 1 || merkleRoot(range.hashes) !== cp.rowsRoot)
        problem("checkpoint_contradicts_rows", `the rows ${cp.fromSeq}..${cp.seq} have another Merkle root`);
    }
    previous = cp.seq;
    if (anchor) {
      if (anchor.head !== cp.hash || anchor.rowsRoot !== cp.rowsRoot)
        problem(
          "checkpoint_contradicts_anchor",
          `the chain anchored head ${short(anchor.head)}, the checkpoint signs ${short(cp.hash)}`,
        );
    } else if (cp.transaction && at.checkAnchors) {
      problem("checkpoint_contradicts_anchor", "the chain has no anchor of this seq from the service's addresses");
    } else if (problems.length === before) unanchored.push(cp.seq);
    if (anchor && problems.length === before) latestAnchored = { seq: cp.seq, transaction: anchor.transaction };
  }
  return { unanchored, latestAnchored };
}

/** Each anchor against the rows at its head, and against the checkpoints listed: an anchor's must be. */
function checkAnchorsOnly(
  anchorOf: Map<number, OnChainAnchor>,
  listed: Set<number>,
  rowsSay: RowsSay,
  problems: CheckpointProblem[],
) {
  for (const anchor of [...anchorOf.values()].sort((a, b) => a.seq - b.seq)) {
    const problem = (kind: CheckpointProblemKind, detail: string) =>
      problems.push({ kind, seq: anchor.seq, transaction: anchor.transaction, detail });
    const rows = rowsSay(anchor.seq, anchor.head);
    if (rows) problem("anchor_contradicts_rows", rows);
    if (!listed.has(anchor.seq))
      problem("checkpoint_missing", "anchored on chain, but the service lists no such checkpoint");
  }
}
