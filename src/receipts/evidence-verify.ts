import type { JWK } from "jose";
import { z } from "zod";
import type { OnChainAnchor } from "../audit/anchor-abi";
import { chainHash } from "../audit/chain";
import { AuditEvent } from "../audit/responses";
import { CHECKPOINT_TYP } from "../audit/checkpoints-verify";
import { verifyMerklePath } from "../audit/merkle";
import { verifyJws } from "../proofs/keys";
import { RECEIPT_TYP } from "./payloads";

/*
 * Checking an evidence file offline: the receipt is signed by a published key and names the audit
 * row in the file; the row's hash is its content's; a signed checkpoint covers the row (its Merkle
 * path leads to the checkpoint's root); and, given the chain's record of the anchoring
 * transaction, the chain carries the same checkpoint. Pure: the caller reads keys and the chain.
 */

export const EVIDENCE_FORMAT = "agent-pay-evidence/1";

const hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const txHash = z.string().regex(/^0x[0-9a-fA-F]{64}$/);

export const EvidenceFileSchema = z.object({
  format: z.literal(EVIDENCE_FORMAT),
  chargeId: z.string().min(1),
  /** The ledger shard whose chain the row and checkpoint are of; absent for shard 0. */
  shard: z.number().int().positive().optional(),
  exportedAt: z.string(),
  receipt: z.string().min(1),
  auditRow: AuditEvent,
  checkpoint: z.object({
    seq: z.number().int().positive(),
    hash: hex64,
    fromSeq: z.number().int().positive(),
    rowsRoot: hex64,
    signedAt: z.string(),
    jws: z.string().min(1),
    transaction: txHash.nullable(),
    blockNumber: z.number().int().nonnegative().nullable(),
    anchoredBy: z.string().nullable(),
  }),
  merklePath: z.array(z.object({ side: z.enum(["left", "right"]), hash: hex64 })).max(64),
  anchor: z.object({ chainId: z.number().int(), network: z.string(), contract: z.string() }).nullable(),
  keys: z.object({ keys: z.array(z.record(z.string(), z.unknown())) }),
});

export type EvidenceFile = z.infer<typeof EvidenceFileSchema>;

export interface EvidenceCheck {
  check: "file" | "receipt" | "audit_row" | "checkpoint" | "covered" | "on_chain";
  /** `skipped`: not checked (no chain given); not a pass. */
  outcome: "ok" | "failed" | "skipped";
  detail: string;
}

export interface EvidenceVerdict {
  ok: boolean;
  checks: EvidenceCheck[];
}

const same = (a: unknown, b: unknown) => a === b;

/**
 * Checks an evidence file. `keys`: the key set to trust, as the verifier got it from the service
 * (never the file's own copy, which anyone can replace). `anchors`: every `Anchored` event of the
 * checkpoint's seq that the service's gas addresses sent to the anchor contract, both as the
 * verifier knows them, read from the chain; null leaves the chain unchecked (`skipped`).
 * `chainId`: the chain they were read from.
 */
export async function verifyEvidence(
  input: unknown,
  options: { keys: { keys: JWK[] }; anchors: readonly OnChainAnchor[] | null; chainId?: number },
): Promise<EvidenceVerdict> {
  const parsed = EvidenceFileSchema.safeParse(input);
  if (!parsed.success)
    return {
      ok: false,
      checks: [
        { check: "file", outcome: "failed", detail: `not an evidence file: ${parsed.error.issues[0]?.message}` },
      ],
    };
  const file = parsed.data;
  const { keys } = options;
  const checks: EvidenceCheck[] = [];
  const add = (check: EvidenceCheck["check"], ok: boolean, detail: string) =>
    checks.push({ check, outcome: ok ? "ok" : "failed", detail });
  const row = file.auditRow;
  const cp = file.checkpoint;

  const receipt = await verifyJws(file.receipt, keys, RECEIPT_TYP);
  if (!receipt.ok) add("receipt", false, `signature: ${receipt.reason}`);
  else {
    const p = receipt.payload;
    // A payment's receipt, naming this row: not a refund's or a payout's, which have rows of their own.
    const agrees =
      same(p.type, "charge") &&
      same(p.chargeId, file.chargeId) &&
      same(p.auditSeq, row.seq) &&
      same(p.auditHash, row.hash) &&
      same(p.amountMinor, row.amountMinor);
    add(
      "receipt",
      agrees,
      agrees
        ? `signed by ${receipt.kid}: charge ${file.chargeId}, ${p.amountMinor} ${p.currency} minor units, audit row ${row.seq}`
        : "the receipt is not this charge's payment, or names another amount or audit row than the file's",
    );
  }

  const rowOk =
    chainHash(row.prevHash, row.seq, row) === row.hash && row.chargeId === file.chargeId && row.type === "charge.paid";
  add(
    "audit_row",
    rowOk,
    rowOk
      ? `row ${row.seq} (charge.paid) hashes to ${row.hash}`
      : `row ${row.seq} is not this charge's payment row, or does not hash to its hash`,
  );

  const signed = await verifyJws(cp.jws, keys, CHECKPOINT_TYP);
  const signedOk =
    signed.ok &&
    same(signed.payload.seq, cp.seq) &&
    same(signed.payload.hash, cp.hash) &&
    same(signed.payload.fromSeq, cp.fromSeq) &&
    same(signed.payload.rowsRoot, cp.rowsRoot) &&
    same(signed.payload.signedAt, cp.signedAt) &&
    same(signed.payload.shard ?? 0, file.shard ?? 0);
  add(
    "checkpoint",
    signedOk,
    signedOk
      ? `checkpoint ${cp.seq} signed by ${signed.ok ? signed.kid : ""} at ${cp.signedAt}`
      : `checkpoint ${cp.seq}: ${signed.ok ? "the signed fields differ from the file's" : signed.reason}`,
  );

  const covered =
    cp.fromSeq <= row.seq && row.seq <= cp.seq && verifyMerklePath(row.hash, file.merklePath, cp.rowsRoot);
  add(
    "covered",
    covered,
    covered
      ? `row ${row.seq} is among rows ${cp.fromSeq}..${cp.seq} of the checkpoint (Merkle path of ${file.merklePath.length})`
      : `the Merkle path does not lead from row ${row.seq} to checkpoint ${cp.seq}'s root`,
  );

  if (options.anchors === null)
    checks.push({ check: "on_chain", outcome: "skipped", detail: "the chain was not read" });
  else {
    const [ok, detail] = onChain(file, options.anchors, options.chainId);
    add("on_chain", ok, detail);
  }
  return { ok: checks.every((c) => c.outcome !== "failed"), checks };
}

/**
 * The seq's first anchor on chain (the earlier block counts; a later one saying otherwise cannot
 * rewrite it) carries this checkpoint's head and root, in the transaction and block the file names.
 */
function onChain(file: EvidenceFile, anchors: readonly OnChainAnchor[], chainId?: number): [boolean, string] {
  const cp = file.checkpoint;
  if (cp.transaction === null) return [false, `checkpoint ${cp.seq} names no anchoring transaction`];
  if (chainId !== undefined && file.anchor?.chainId !== chainId)
    return [false, `the file's chain (${file.anchor?.chainId ?? "none"}) is not the one read (${chainId})`];
  const first = [...anchors]
    .filter((a) => a.seq === cp.seq && (a.shard ?? 0) === (file.shard ?? 0))
    .sort((a, b) => a.blockNumber - b.blockNumber)[0];
  if (!first) return [false, `no anchor of checkpoint ${cp.seq} from the service's addresses on chain`];
  if (first.head !== cp.hash || first.rowsRoot !== cp.rowsRoot)
    return [false, `the chain's first anchor of seq ${cp.seq} (${first.transaction}) is another checkpoint`];
  if (first.transaction.toLowerCase() !== cp.transaction.toLowerCase() || first.blockNumber !== cp.blockNumber)
    return [false, `checkpoint ${cp.seq} was first anchored by ${first.transaction}, not ${cp.transaction}`];
  return [
    true,
    `transaction ${first.transaction} (block ${first.blockNumber}) from ${first.by} anchors checkpoint ${cp.seq}`,
  ];
}
