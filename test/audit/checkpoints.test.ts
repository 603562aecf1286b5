import { env } from "cloudflare:workers";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { checkpointAt } from "../../src/audit/checkpoint-rows";
import { CHECKPOINT_TYP } from "../../src/audit/checkpoints-verify";
import { merkleRoot } from "../../src/audit/merkle";
import { ANCHOR_RESEND_AFTER_MS, anchorCheckpoint, auditCheckpointJob } from "../../src/checkpoints/anchoring";
import { makeCheckpoint } from "../../src/checkpoints/checkpoints";
import { setFaultHook } from "../../src/lib/faults";
import { verifyJws } from "../../src/proofs/keys";
import { api, consoleToken } from "../helpers/api";
import { anchoredEnv, anchorsOn, consoleCall, deployAnchor, gasAddresses } from "../helpers/checkpoints";
import { createAgent } from "../helpers/factories";
import { publicClient } from "../helpers/x402";

// Audit checkpoints against the real local chain: signed, stored, anchored by the AuditAnchor
// contract's event, at most once across crashes. This file deploys its own anchor contract.

let contract: `0x${string}`;
beforeAll(async () => {
  contract = await deployAnchor();
});
afterEach(() => setFaultHook(null));

const rowHashes = async (fromSeq: number, toSeq: number) =>
  (
    await env.DB.prepare("SELECT hash FROM audit_events WHERE seq BETWEEN ? AND ? ORDER BY seq")
      .bind(fromSeq, toSeq)
      .all<{ hash: string }>()
  ).results.map((r) => r.hash);
const head = () =>
  env.DB.prepare("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").first<{ seq: number; hash: string }>();
/** Some audit rows: an agent and its credit. */
const moreRows = () => createAgent({ credit: 500 });

describe("audit checkpoints", () => {
  it("has none on an empty chain: 409 audit_chain_empty to sign, 404 checkpoint_not_found to read", async () => {
    const token = await consoleToken();
    expect(await head()).toBeNull();
    const made = await api("POST", "/console/audit/checkpoints", { token });
    expect(made.status).toBe(409);
    expect(made.body).toEqual({ error: "audit_chain_empty" });
    const latest = await api("GET", "/audit/checkpoints/latest", { token });
    expect(latest.status).toBe(404);
    expect(latest.body).toEqual({ error: "checkpoint_not_found" });
    expect((await api("GET", "/audit/checkpoints/latest")).status).toBe(401);
  });

  it("signs the head on demand and anchors it on chain: the event carries seq, head and rowsRoot", async () => {
    await moreRows();
    await moreRows();
    const top = (await head())!;
    const made = await consoleCall(anchoredEnv(contract), "POST", "/console/audit/checkpoints");
    expect(made.status).toBe(201);
    const cp = made.body.checkpoint;
    expect(cp).toMatchObject({ seq: top.seq, hash: top.hash, fromSeq: 1, anchorStatus: "confirmed" });
    expect(cp.rowsRoot).toBe(merkleRoot(await rowHashes(1, top.seq)));
    expect(cp.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(cp.anchoredBy).toBe(gasAddresses()[0]);

    // On chain: the transaction emitted the anchor of this seq, head and root, from the service's gas key.
    const receipt = await publicClient().getTransactionReceipt({ hash: cp.transaction });
    expect(receipt.status).toBe("success");
    expect(Number(receipt.blockNumber)).toBe(cp.blockNumber);
    expect(await anchorsOn(contract, top.seq)).toEqual([
      {
        seq: top.seq,
        head: top.hash,
        rowsRoot: cp.rowsRoot,
        by: gasAddresses()[0],
        transaction: cp.transaction,
        blockNumber: cp.blockNumber,
      },
    ]);

    // The JWS verifies with the published keys and signs exactly these fields.
    const jwks = (await api("GET", "/.well-known/jwks.json")).body;
    const verdict = await verifyJws(cp.jws, jwks, CHECKPOINT_TYP);
    expect(verdict.ok && verdict.payload).toEqual({
      seq: top.seq,
      hash: top.hash,
      fromSeq: 1,
      rowsRoot: cp.rowsRoot,
      signedAt: cp.signedAt,
    });
    expect(verdict.ok && verdict.kid).toBe(cp.kid);

    // The head has not moved: the same checkpoint, 200, and nothing anchored again.
    const again = await consoleCall(anchoredEnv(contract), "POST", "/console/audit/checkpoints");
    expect(again.status).toBe(200);
    expect(again.body.checkpoint).toEqual(cp);
    const latest = await api("GET", "/audit/checkpoints/latest", { token: await consoleToken() });
    expect(latest.status).toBe(200);
    expect(latest.body.checkpoint).toEqual(cp);
    expect(await anchorsOn(contract, top.seq)).toHaveLength(1);
  });

  it("makes the next checkpoint on the cron, covering the rows since the last one", async () => {
    const before = (await head())!;
    await moreRows();
    const top = (await head())!;
    await auditCheckpointJob(anchoredEnv(contract));
    const cp = (await checkpointAt(env.DB, top.seq))!;
    expect(cp).toMatchObject({ seq: top.seq, hash: top.hash, fromSeq: before.seq + 1, anchorStatus: "confirmed" });
    expect(cp.rowsRoot).toBe(merkleRoot(await rowHashes(before.seq + 1, top.seq)));
    const [anchor] = await anchorsOn(contract, top.seq);
    expect(anchor).toMatchObject({ head: top.hash, rowsRoot: cp.rowsRoot, transaction: cp.txHash });
    // The head has not moved since: the job signs nothing more.
    await auditCheckpointJob(anchoredEnv(contract));
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_checkpoints").first("n")).toBe(2);

    const list = await api("GET", "/console/audit/checkpoints?afterSeq=0&limit=1", { token: await consoleToken() });
    expect(list.body.checkpoints.map((c: { seq: number }) => c.seq)).toEqual([before.seq]);
    expect(list.body.nextAfterSeq).toBe(before.seq);
    const rest = await api("GET", `/console/audit/checkpoints?afterSeq=${before.seq}`, { token: await consoleToken() });
    expect(rest.body).toMatchObject({ checkpoints: [{ seq: top.seq, fromSeq: before.seq + 1 }], nextAfterSeq: null });
  });

  it("signs one checkpoint per seq when several are asked for at once, and anchors it once", async () => {
    await moreRows();
    const top = (await head())!;
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => consoleCall(anchoredEnv(contract), "POST", "/console/audit/checkpoints")),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 201]);
    expect(new Set(answers.map((a) => a.body.checkpoint.seq))).toEqual(new Set([top.seq]));
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_checkpoints WHERE seq >= ?").bind(top.seq).first("n"),
    ).toBe(1);
    // Checkpoints never overlap: each starts after the one before.
    const all = (await env.DB.prepare("SELECT seq, from_seq FROM audit_checkpoints ORDER BY seq").all()).results;
    expect(all.map((c) => c.from_seq)).toEqual(all.map((_, i) => (i === 0 ? 1 : (all[i - 1]!.seq as number) + 1)));
    expect(await anchorsOn(contract, top.seq)).toHaveLength(1);
    expect((await checkpointAt(env.DB, top.seq))!.anchorStatus).toBe("confirmed");
  });

  it("without an anchor address signs and stores the checkpoint, pending, says so once per run, and anchors it once configured", async () => {
    await moreRows();
    const top = (await head())!;
    const made = await api("POST", "/console/audit/checkpoints", { token: await consoleToken() });
    expect(made.status).toBe(201);
    expect(made.body.checkpoint).toMatchObject({
      seq: top.seq,
      anchorStatus: "pending",
      transaction: null,
      blockNumber: null,
    });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      await moreRows();
      await auditCheckpointJob(env); // signs the new head too: two pending now, one warning
      const lines = warn.mock.calls
        .flat()
        .map(String)
        .filter((l) => l.includes("audit_anchor_not_configured"));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ pending: 2, reason: "AUDIT_ANCHOR_ADDRESS is not set" });
    } finally {
      warn.mockRestore();
    }
    expect(await anchorsOn(contract, top.seq)).toEqual([]);
    await auditCheckpointJob(anchoredEnv(contract));
    const pending = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM audit_checkpoints WHERE anchor_status != 'confirmed'",
    ).first("n");
    expect(pending).toBe(0);
    expect(await anchorsOn(contract, top.seq)).toHaveLength(1);
  });

  it("sends nothing to an anchor address without a contract (it would emit nothing and be paid for every run)", async () => {
    await moreRows();
    const made = await makeCheckpoint(env);
    if (made.kind !== "created") throw new Error("expected a new checkpoint");
    const nowhere = `0x${"ab".repeat(20)}` as const;
    expect(await anchorCheckpoint(anchoredEnv(nowhere), made.checkpoint)).toEqual({
      kind: "waiting",
      reason: "no contract at AUDIT_ANCHOR_ADDRESS",
    });
    expect(await checkpointAt(env.DB, made.checkpoint.seq)).toMatchObject({
      anchorStatus: "pending",
      broadcastAt: null,
    });
    // Anchored properly once the address is the contract's.
    expect((await anchorCheckpoint(anchoredEnv(contract), made.checkpoint)).kind).toBe("confirmed");
  });

  for (const point of ["checkpoint.before_send", "checkpoint.after_send"] as const) {
    it(`settles a crash at ${point} from the chain, with exactly one anchor`, async () => {
      await moreRows();
      const made = await makeCheckpoint(env);
      expect(made.kind).toBe("created");
      const seq = made.kind === "created" ? made.checkpoint.seq : 0;
      setFaultHook((at) => {
        if (at === point) throw new Error(`crash at ${at}`);
      });
      await expect(
        anchorCheckpoint(anchoredEnv(contract), made.kind === "created" ? made.checkpoint : null!),
      ).rejects.toThrow(`crash at ${point}`);
      setFaultHook(null);
      const marked = (await checkpointAt(env.DB, seq))!;
      expect(marked).toMatchObject({ anchorStatus: "pending", txHash: null });
      expect(marked.broadcastAt).not.toBeNull();
      expect(await anchorsOn(contract, seq)).toHaveLength(point === "checkpoint.after_send" ? 1 : 0);

      // Soon after, nobody sends it again: the one who marked it may still be on it.
      expect(await anchorCheckpoint(anchoredEnv(contract), marked)).toEqual({
        kind: "waiting",
        reason: "sent recently",
      });
      // A while later the chain decides: found (after the send) or sent now (before it), once.
      const later = Date.now() + ANCHOR_RESEND_AFTER_MS + 1000;
      // Before the send, the lane's key must have nothing unmined (other files' settlements share it): a
      // moment's wait is the expected answer while one of theirs is in flight.
      let step = await anchorCheckpoint(anchoredEnv(contract), marked, later);
      for (let i = 0; i < 20 && step.kind === "waiting" && step.reason === "still_in_mempool"; i++) {
        await new Promise((r) => setTimeout(r, 100));
        step = await anchorCheckpoint(anchoredEnv(contract), (await checkpointAt(env.DB, seq))!, later);
      }
      expect(step.kind).toBe("confirmed");
      const anchors = await anchorsOn(contract, seq);
      expect(anchors).toHaveLength(1);
      const settled = (await checkpointAt(env.DB, seq))!;
      expect(settled).toMatchObject({
        anchorStatus: "confirmed",
        txHash: anchors[0]!.transaction,
        blockNumber: anchors[0]!.blockNumber,
      });
      // And again later: still one.
      await anchorCheckpoint(anchoredEnv(contract), settled, later + ANCHOR_RESEND_AFTER_MS);
      expect(await anchorsOn(contract, seq)).toHaveLength(1);
    });
  }

  it("never sends an anchor again while its transaction waits unmined; once that one is mined without it, sends it once", async () => {
    await moreRows();
    const made = await makeCheckpoint(env);
    expect(made.kind).toBe("created");
    const seq = made.kind === "created" ? made.checkpoint.seq : 0;
    // A transaction the node holds and does not mine (a nonce gap of a fresh account), as the recorded one.
    const stuck = await unminedTransaction();
    const past = new Date(Date.now() - 1000).toISOString();
    await env.DB.prepare(
      "UPDATE audit_checkpoints SET anchor_status = 'sent', anchor_from = ?, tx_hash = ?, broadcast_at = ?, updated_at = ? WHERE seq = ?",
    )
      .bind(gasAddresses()[0], stuck.hash, past, past, seq)
      .run();
    const later = Date.now() + ANCHOR_RESEND_AFTER_MS + 1000;
    const sent = (await checkpointAt(env.DB, seq))!;
    expect(await anchorCheckpoint(anchoredEnv(contract), sent, later)).toEqual({
      kind: "waiting",
      reason: "still_in_mempool",
    });
    expect(await anchorsOn(contract, seq)).toHaveLength(0);
    // Mined at last, and no anchor in it (as if replaced): nothing pending, nothing on chain, so it goes again, once.
    await stuck.release();
    expect(await anchorCheckpoint(anchoredEnv(contract), sent, later)).toMatchObject({ kind: "confirmed" });
    expect(await anchorsOn(contract, seq)).toHaveLength(1);
  });
});

/**
 * A transaction the node accepts and does not mine: a fresh account's, one nonce ahead. `release`
 * sends the missing one, and both are mined.
 */
async function unminedTransaction() {
  const account = privateKeyToAccount(generatePrivateKey());
  await publicClient().request({
    method: "anvil_setBalance" as never,
    params: [account.address, `0x${(10n ** 18n).toString(16)}`] as never,
  });
  const chainId = await publicClient().getChainId();
  const send = async (nonce: number) =>
    publicClient().request({
      method: "eth_sendRawTransaction",
      params: [
        await account.signTransaction({
          chainId,
          type: "eip1559",
          to: account.address,
          value: 0n,
          nonce,
          gas: 21_000n,
          maxFeePerGas: 10n ** 10n,
          maxPriorityFeePerGas: 1n,
        }),
      ],
    });
  const hash: Hex = await send(1);
  return {
    hash,
    release: async () => {
      await send(0);
      await publicClient().waitForTransactionReceipt({ hash, pollingInterval: 50 });
    },
  };
}
