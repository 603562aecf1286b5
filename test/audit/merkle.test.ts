import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { merkleLeaf, merklePath, merkleRoot, verifyMerklePath } from "../../src/audit/merkle";

const sha = (...parts: (Uint8Array | string)[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(typeof p === "string" ? Buffer.from(p, "hex") : p);
  return h.digest("hex");
};
const rowHash = (i: number) => createHash("sha256").update(`row ${i}`).digest("hex");
const hashes = (n: number) => Array.from({ length: n }, (_, i) => rowHash(i));

describe("the checkpoints' Merkle tree", () => {
  it("follows the documented construction: 0x00 leaves, 0x01 inner nodes, an odd node promoted", () => {
    const [a, b, c] = hashes(3) as [string, string, string];
    const leaf = (h: string) => sha(Uint8Array.of(0), h);
    const node = (l: string, r: string) => sha(Uint8Array.of(1), l, r);
    expect(merkleLeaf(a)).toBe(leaf(a));
    expect(merkleRoot([a])).toBe(leaf(a));
    expect(merkleRoot([a, b])).toBe(node(leaf(a), leaf(b)));
    // Three leaves: (a,b) pair up, c is promoted unchanged, then they pair.
    expect(merkleRoot([a, b, c])).toBe(node(node(leaf(a), leaf(b)), leaf(c)));
  });

  it("proves every leaf of trees of many sizes, and nothing else", () => {
    for (const n of [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33]) {
      const rows = hashes(n);
      const root = merkleRoot(rows);
      for (let i = 0; i < n; i++) {
        const path = merklePath(rows, i);
        expect(verifyMerklePath(rows[i]!, path, root)).toBe(true);
        // Another row's hash, a changed sibling, or another root fail.
        expect(verifyMerklePath(rowHash(1000 + i), path, root)).toBe(false);
        if (path.length > 0) {
          const bent = path.map((s, k) => (k === 0 ? { ...s, hash: rowHash(999) } : s));
          expect(verifyMerklePath(rows[i]!, bent, root)).toBe(false);
          const flipped = path.map((s, k) =>
            k === 0 ? ({ ...s, side: s.side === "left" ? "right" : "left" } as const) : s,
          );
          expect(verifyMerklePath(rows[i]!, flipped, root)).toBe(false);
        }
        expect(verifyMerklePath(rows[i]!, path, merkleRoot(hashes(n + 1)))).toBe(false);
      }
    }
  });

  it("keeps an inner node from passing as a row (second preimage)", () => {
    const rows = hashes(4);
    const root = merkleRoot(rows);
    // The inner node over rows 0 and 1, offered as if it were a row of a two-leaf tree.
    const inner = sha(Uint8Array.of(1), merkleLeaf(rows[0]!), merkleLeaf(rows[1]!));
    const other = sha(Uint8Array.of(1), merkleLeaf(rows[2]!), merkleLeaf(rows[3]!));
    expect(verifyMerklePath(inner, [{ side: "right", hash: other }], root)).toBe(false);
  });

  it("refuses no rows, an index out of range and malformed hashes", () => {
    expect(() => merkleRoot([])).toThrow();
    expect(() => merklePath(hashes(2), 2)).toThrow();
    expect(() => merkleRoot(["ABC"])).toThrow();
    expect(verifyMerklePath("zz", [], merkleRoot(hashes(1)))).toBe(false);
  });
});
