import { archivedReceiptRow, type HistoryStore } from "../audit/archived";
import { type Checkpoint, checkpointCovering } from "../audit/checkpoint-rows";
import { merklePath, merkleRoot } from "../audit/merkle";
import { type AuditRecord, auditRowOf, auditRowOfType, rowHashes } from "../audit/service";
import { paidChargeRead } from "../charges/statements";
import { anchoringOf } from "../checkpoints/anchoring";
import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { readTogether } from "../db/statements";
import type { AuditRow } from "../ledger/chain";
import { shardField } from "../ledger/shard-labels";
import { nowIso } from "../lib/time";
import { publishedJwks } from "../proofs/keys";
import { EVIDENCE_FORMAT, type EvidenceFile } from "./evidence-verify";
import { chargeReceipt, storeOfId } from "./service";

/*
 * The evidence file of one paid charge: what a merchant or agent hands a third party so it can
 * check, offline, that the payment happened as the receipt says and is in the tamper-evident
 * history. It holds the receipt, the payment's audit row, the first checkpoint that covers that
 * row, the Merkle path from the row to the checkpoint's root (sibling hashes only, so no other
 * row is shown), and the checkpoint's anchoring transaction. The file is ready once a checkpoint
 * covers the row and, where the deployment anchors checkpoints, once that one is on chain.
 */

export type EvidenceResult = { kind: "ready"; evidence: EvidenceFile } | { kind: "not_found" } | { kind: "not_ready" };

/**
 * The merchant's paid charge's payment row, from D1 or, once archived, from R2; null for an
 * unknown, unpaid or other merchant's charge.
 */
async function paymentRow(store: HistoryStore, merchantId: string, chargeId: string): Promise<AuditRow | null> {
  const [[paid], [live]] = await readTogether<[{ id: string }, AuditRecord]>(
    store.DB,
    paidChargeRead(chargeId, merchantId),
    auditRowOfType("charge.paid", { chargeId }),
  );
  if (!paid) return null;
  if (live) return auditRowOf(live);
  return archivedReceiptRow(store, "charge.paid", { chargeId });
}

/** The hashes of the rows a checkpoint covers, in order; checked against its signed root. */
async function coveredHashes(store: HistoryStore, cp: Checkpoint): Promise<string[]> {
  const hashes = await rowHashes(store, cp.fromSeq, cp.seq);
  // The database disagreeing with what it signed is for an operator, never a file handed out.
  if (merkleRoot(hashes) !== cp.rowsRoot)
    throw new Error(`audit rows ${cp.fromSeq}..${cp.seq} do not match checkpoint ${cp.seq}`);
  return hashes;
}

/**
 * The evidence of a paid charge, read in the charge's ledger shard (its id names it): the row, the
 * checkpoint and the path are that shard's chain's, and the file names the shard when it is not 0.
 */
export async function chargeEvidence(env: Env, merchantId: string, chargeId: string): Promise<EvidenceResult> {
  const settings = settingsOf(env);
  const store = storeOfId(env, chargeId);
  if (!store) return { kind: "not_found" };
  const auditRow = await paymentRow(store, merchantId, chargeId);
  if (!auditRow) return { kind: "not_found" };
  const checkpoint = await checkpointCovering(store.DB, auditRow.seq);
  const anchoring = anchoringOf(env);
  const anchors = typeof anchoring !== "string";
  if (!checkpoint || (anchors && checkpoint.anchorStatus !== "confirmed")) return { kind: "not_ready" };
  const receipt = await chargeReceipt(store, settings.proofs, chargeId);
  if (!receipt) return { kind: "not_found" };
  const hashes = await coveredHashes(store, checkpoint);
  const onChain = checkpoint.anchorStatus === "confirmed";
  return {
    kind: "ready",
    evidence: {
      format: EVIDENCE_FORMAT,
      chargeId,
      ...shardField(store.shard),
      exportedAt: nowIso(),
      receipt,
      auditRow,
      checkpoint: {
        seq: checkpoint.seq,
        hash: checkpoint.hash,
        fromSeq: checkpoint.fromSeq,
        rowsRoot: checkpoint.rowsRoot,
        signedAt: checkpoint.signedAt,
        jws: checkpoint.jws,
        transaction: onChain ? checkpoint.txHash : null,
        blockNumber: onChain ? checkpoint.blockNumber : null,
        anchoredBy: onChain ? checkpoint.anchorFrom : null,
      },
      merklePath: merklePath(hashes, auditRow.seq - checkpoint.fromSeq),
      anchor: anchors
        ? { chainId: anchoring.x.chainId, network: anchoring.x.network, contract: anchoring.contract }
        : null,
      keys: await publishedJwks(settings.proofs),
    },
  };
}
