import { createHash } from "node:crypto";

/*
 * The Merkle tree over the hashes of the audit rows a checkpoint covers, so one row can be shown
 * to be covered by a checkpoint with a path of sibling hashes, without the rows around it.
 *
 * Construction (SHA-256, hashes as lowercase hex of 32 bytes):
 *   leaf  = SHA-256(0x00 || row hash)
 *   inner = SHA-256(0x01 || left || right)
 * Each level pairs its nodes left to right; an odd last node is promoted to the next level as it
 * is. The root of a single row is its leaf. The distinct prefixes keep a leaf from passing as an
 * inner node (and the reverse).
 */

const HEX32 = /^[0-9a-f]{64}$/;

function digest(prefix: number, ...parts: string[]): string {
  const hash = createHash("sha256").update(Uint8Array.of(prefix));
  for (const part of parts) {
    if (!HEX32.test(part)) throw new Error("merkle: expected a 32-byte lowercase hex hash");
    hash.update(Buffer.from(part, "hex"));
  }
  return hash.digest("hex");
}

export const merkleLeaf = (rowHash: string) => digest(0x00, rowHash);
const merkleNode = (left: string, right: string) => digest(0x01, left, right);

/** One step up a path: the sibling's hash and on which side of the running node it sits. */
export interface MerkleStep {
  side: "left" | "right";
  hash: string;
}

function nextLevel(level: string[]): string[] {
  const next: string[] = [];
  for (let i = 0; i < level.length; i += 2)
    next.push(i + 1 < level.length ? merkleNode(level[i]!, level[i + 1]!) : level[i]!);
  return next;
}

/** The root over the row hashes, in order. */
export function merkleRoot(rowHashes: readonly string[]): string {
  if (rowHashes.length === 0) throw new Error("merkle: no rows");
  let level = rowHashes.map(merkleLeaf);
  while (level.length > 1) level = nextLevel(level);
  return level[0]!;
}

/** The siblings from leaf `index` up to the root (a promoted node has none at its level). */
export function merklePath(rowHashes: readonly string[], index: number): MerkleStep[] {
  if (!Number.isInteger(index) || index < 0 || index >= rowHashes.length) throw new Error("merkle: index out of range");
  const path: MerkleStep[] = [];
  let level = rowHashes.map(merkleLeaf);
  let at = index;
  while (level.length > 1) {
    const sibling = at % 2 === 0 ? at + 1 : at - 1;
    if (sibling < level.length) path.push({ side: at % 2 === 0 ? "right" : "left", hash: level[sibling]! });
    level = nextLevel(level);
    at = Math.floor(at / 2);
  }
  return path;
}

/** Whether `path` leads from the row hash to `root`. Never throws. */
export function verifyMerklePath(rowHash: string, path: readonly MerkleStep[], root: string): boolean {
  try {
    let node = merkleLeaf(rowHash);
    for (const step of path) node = step.side === "left" ? merkleNode(step.hash, node) : merkleNode(node, step.hash);
    return node === root;
  } catch {
    return false;
  }
}
