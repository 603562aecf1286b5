import { env } from "cloudflare:workers";
import { CompactSign, exportJWK, generateKeyPair } from "jose";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CHECKPOINT_TYP, type ListedCheckpoint, verifyCheckpoints } from "../../src/audit/checkpoints-verify";
import { merkleRoot } from "../../src/audit/merkle";
import { auditRows } from "../../src/audit/service";
import { auditCheckpointJob } from "../../src/checkpoints/anchoring";
import { makeCheckpoint } from "../../src/checkpoints/checkpoints";
import { type AuditRow, chainHash } from "../../src/ledger/chain";
import { api, consoleToken } from "../helpers/api";
import { anchoredEnv, anchorsOn, deployAnchor } from "../helpers/checkpoints";
import { createAgent } from "../helpers/factories";
import { restoreRows, rowsOf } from "../helpers/tables";

// The two attacks the audit chain alone cannot see, made on D1 directly: rows removed from the end,
// and the whole chain rewritten with fresh hashes. The checkpoints anchored on chain before either
// contradict the tampered rows, and the verifier names the checkpoint (its seq and transaction).

let contract: `0x${string}`;
let original: { rows: Record<string, unknown>[]; checkpoints: Record<string, unknown>[] };
/** The checkpoints as anchored before any tampering, oldest first. */
let anchored: { seq: number; fromSeq: number; txHash: string }[];

/** What `audit verify` checks: the rows and checkpoints from the service, the keys it publishes, the anchors from the chain. */
async function verify() {
  const token = await consoleToken();
  const listed = (await api("GET", "/console/audit/checkpoints?limit=1000", { token })).body
    .checkpoints as ListedCheckpoint[];
  const jwks = (await api("GET", "/.well-known/jwks.json")).body;
  return verifyCheckpoints({
    rows: auditRows(env),
    checkpoints: listed,
    jwks,
    anchors: await anchorsOn(contract),
  });
}

const problemsOf = (verdict: Awaited<ReturnType<typeof verify>>) =>
  verdict.problems.map(({ kind, seq, transaction }) => ({ kind, seq, transaction }));

/** Every row from `fromSeq` on rewritten: the first one's amount changed, then each hash made afresh. */
async function rewriteChain() {
  const rows: AuditRow[] = [];
  for await (const row of auditRows(env)) rows.push(row);
  let prevHash = "0".repeat(64);
  const rewritten: AuditRow[] = [];
  for (const row of rows) {
    const draft = { ...row, amountMinor: row.seq === 1 ? row.amountMinor! + 100 : row.amountMinor };
    const hash = chainHash(prevHash, row.seq, draft);
    await env.DB.prepare("UPDATE audit_events SET amount_minor = ?, prev_hash = ?, hash = ? WHERE seq = ?")
      .bind(draft.amountMinor, prevHash, hash, row.seq)
      .run();
    rewritten.push({ ...draft, prevHash, hash });
    prevHash = hash;
  }
  return rewritten;
}

beforeAll(async () => {
  contract = await deployAnchor();
  // Three checkpoints, each anchored, with rows between them.
  for (let i = 0; i < 3; i++) {
    await createAgent({ credit: 100 + i });
    await createAgent({ credit: 200 + i });
    await auditCheckpointJob(anchoredEnv(contract));
  }
  original = { rows: await rowsOf("audit_events"), checkpoints: await rowsOf("audit_checkpoints") };
  anchored = original.checkpoints.map((c) => ({
    seq: c.seq as number,
    fromSeq: c.from_seq as number,
    txHash: c.tx_hash as string,
  }));
  expect(original.checkpoints.map((c) => c.anchor_status)).toEqual(["confirmed", "confirmed", "confirmed"]);
});

beforeEach(async () => {
  await restoreRows("audit_events", original.rows);
  await restoreRows("audit_checkpoints", original.checkpoints);
});

describe("audit verify against checkpoints anchored on chain", () => {
  it("passes an untouched chain, naming the latest anchored checkpoint", async () => {
    const verdict = await verify();
    expect(verdict).toMatchObject({ ok: true, checkpoints: 3, anchors: 3, unanchored: [], problems: [] });
    expect(verdict.chain.ok).toBe(true);
    expect(verdict.latestAnchored).toEqual({ seq: anchored[2]!.seq, transaction: anchored[2]!.txHash });
  });

  it("fails rows removed from the end with the checkpoints that covered them, naming the anchor they contradict", async () => {
    const last = anchored[2]!;
    await env.DB.prepare("DELETE FROM audit_events WHERE seq >= ?").bind(last.fromSeq).run();
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE seq >= ?").bind(last.fromSeq).run();
    const verdict = await verify();
    // The chain alone sees nothing wrong: it is shorter, not broken.
    expect(verdict.chain.ok).toBe(true);
    expect(verdict.ok).toBe(false);
    expect(problemsOf(verdict)).toEqual([
      { kind: "anchor_contradicts_rows", seq: last.seq, transaction: last.txHash },
      { kind: "checkpoint_missing", seq: last.seq, transaction: last.txHash },
    ]);
    expect(verdict.problems[0]!.detail).toContain("rows removed from the end");
  });

  it("fails rows removed from the end while their checkpoint stays listed", async () => {
    const last = anchored[2]!;
    await env.DB.prepare("DELETE FROM audit_events WHERE seq = ?").bind(last.seq).run();
    const verdict = await verify();
    expect(verdict.chain.ok).toBe(true);
    expect(problemsOf(verdict)).toEqual([
      { kind: "checkpoint_contradicts_rows", seq: last.seq, transaction: last.txHash },
      { kind: "anchor_contradicts_rows", seq: last.seq, transaction: last.txHash },
    ]);
  });

  it("fails a chain rewritten with fresh hashes under the checkpoints signed before", async () => {
    await rewriteChain();
    const verdict = await verify();
    expect(verdict.chain.ok).toBe(true);
    expect(verdict.ok).toBe(false);
    for (const cp of anchored) {
      expect(problemsOf(verdict)).toContainEqual({
        kind: "checkpoint_contradicts_rows",
        seq: cp.seq,
        transaction: cp.txHash,
      });
      expect(problemsOf(verdict)).toContainEqual({
        kind: "anchor_contradicts_rows",
        seq: cp.seq,
        transaction: cp.txHash,
      });
    }
    expect(verdict.problems.find((p) => p.kind === "anchor_contradicts_rows")!.detail).toContain("rewritten");
  });

  it("fails a rewritten chain whose checkpoints were forged with a stranger's key", async () => {
    const rows = await rewriteChain();
    const { privateKey, publicKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    expect((await exportJWK(publicKey)).x).toBeTruthy();
    for (const cp of anchored) {
      const covered = rows.filter((r) => r.seq >= cp.fromSeq && r.seq <= cp.seq).map((r) => r.hash);
      const hash = covered[covered.length - 1]!;
      const rowsRoot = merkleRoot(covered);
      const signedAt = new Date().toISOString();
      const payload = { seq: cp.seq, hash, fromSeq: cp.fromSeq, rowsRoot, signedAt };
      const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
        .setProtectedHeader({ alg: "EdDSA", kid: "stranger", typ: CHECKPOINT_TYP })
        .sign(privateKey);
      await env.DB.prepare(
        "UPDATE audit_checkpoints SET hash = ?, rows_root = ?, signed_at = ?, jws = ?, kid = 'stranger' WHERE seq = ?",
      )
        .bind(hash, rowsRoot, signedAt, jws, cp.seq)
        .run();
    }
    const verdict = await verify();
    expect(verdict.chain.ok).toBe(true);
    for (const cp of anchored)
      for (const kind of ["signature_invalid", "checkpoint_contradicts_anchor", "anchor_contradicts_rows"])
        expect(problemsOf(verdict)).toContainEqual({ kind, seq: cp.seq, transaction: cp.txHash });
    // The forged checkpoints match the forged rows: only the keys and the chain's anchors give them away.
    expect(problemsOf(verdict).filter((p) => p.kind === "checkpoint_contradicts_rows")).toEqual([]);
  });

  it("fails a rewritten chain even when checkpoints are signed afresh with the service's own key", async () => {
    await rewriteChain();
    await env.DB.prepare("DELETE FROM audit_checkpoints").run();
    const remade = await makeCheckpoint(env);
    expect(remade.kind).toBe("created");
    const verdict = await verify();
    expect(verdict.chain.ok).toBe(true);
    expect(problemsOf(verdict).filter((p) => p.kind === "signature_invalid")).toEqual([]);
    // The insider's one checkpoint spans everything; the chain's three anchors name heads the rows no longer have.
    for (const cp of anchored)
      expect(problemsOf(verdict)).toContainEqual({
        kind: "anchor_contradicts_rows",
        seq: cp.seq,
        transaction: cp.txHash,
      });
    expect(verdict.ok).toBe(false);
  });
});
