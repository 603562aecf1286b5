import type { JWK } from "jose";
import { z } from "zod";
import { CHECKPOINT_TYP } from "../audit/checkpoints-verify";
import { verifyMerklePath } from "../audit/merkle";
import { AuditEvent } from "../audit/responses";
import { chainHash } from "../ledger/chain";
import { exactBaseUnitsOf } from "../lib/money";
import { verifyJws } from "../proofs/keys";
import { type ChainTrust, checkOnChain, checkpointName, type SignedHead } from "./evidence-chain";
import { RECEIPT_TYP } from "./payloads";

export type { AnchorAt, AnchorsRead } from "./evidence-chain";

/*
 * Checking an evidence file offline: the receipt is signed by a trusted key and names the audit row
 * in the file; the row's hash is its content's; a signed checkpoint covers the row (its Merkle path
 * leads to the root the checkpoint signed); and the chain's first anchor of that checkpoint carries
 * it, in the transaction, block and from the address the file names. Every field is checked against
 * something the verifier trusts (a signature by a key it chose, a hash it recomputes, the chain it
 * reads), and a failure names the field. Pure: the caller reads the keys and the chain.
 */

export const EVIDENCE_FORMAT = "agent-pay-evidence/1";

const hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const txHash = z.string().regex(/^0x[0-9a-fA-F]{64}$/);

export const EvidenceFileSchema = z.object({
  format: z.literal(EVIDENCE_FORMAT),
  chargeId: z.string().min(1),
  /** The ledger shard whose chain the row and checkpoint are of; absent for shard 0. The checkpoint signs it too. */
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

/** What a checkpoint's JWS signs (src/checkpoints/checkpoints.ts checkpointPayload): `shard` for k ≥ 1 only. */
const SignedCheckpoint = z.object({
  seq: z.number().int().positive(),
  hash: hex64,
  fromSeq: z.number().int().positive(),
  rowsRoot: hex64,
  signedAt: z.string(),
  shard: z.number().int().positive().optional(),
});
type SignedCheckpoint = z.infer<typeof SignedCheckpoint>;

export interface EvidenceCheck {
  check: "file" | "receipt" | "audit_row" | "checkpoint" | "keys" | "covered" | "on_chain";
  /** `skipped`: not checked (no chain given, or nothing trusted to look for); not a pass. */
  outcome: "ok" | "failed" | "skipped";
  detail: string;
}

export interface EvidenceVerdict {
  ok: boolean;
  checks: EvidenceCheck[];
}

/**
 * What the verifier trusts. `keys`: the key set as the verifier got it from the service (never the
 * file's own copy, which anyone can replace). `anchors`: the anchors its trusted senders sent to its
 * anchor contract, read from the chain (see AnchorsRead); null leaves the chain unchecked (`skipped`).
 * `chainId` and `contract`: the chain and anchor contract they were read from, checked against the file's.
 */
export interface EvidenceTrust extends Partial<Omit<ChainTrust, "anchors">> {
  keys: { keys: JWK[] };
  anchors: ChainTrust["anchors"] | null;
}

const show = (value: unknown) => (value === null || value === undefined ? "none" : String(value));

/** `field: the file says a, <source> b`, or nothing when they agree. */
const differs = (field: string, inFile: unknown, trusted: unknown, source: string): string[] =>
  inFile === trusted ? [] : [`${field}: the file says ${show(inFile)}, ${source} ${show(trusted)}`];

type Add = (check: EvidenceCheck["check"], wrong: string[], ok: string) => void;

/** Checks an evidence file; each check names the fields of the file it found wrong. */
export async function verifyEvidence(input: unknown, trust: EvidenceTrust): Promise<EvidenceVerdict> {
  const parsed = EvidenceFileSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const detail = `not an evidence file: ${issue?.path.join(".") || "the file"}: ${issue?.message}`;
    return { ok: false, checks: [{ check: "file", outcome: "failed", detail }] };
  }
  const file = parsed.data;
  const checks: EvidenceCheck[] = [];
  const add: Add = (check, wrong, ok) =>
    checks.push(
      wrong.length === 0
        ? { check, outcome: "ok", detail: ok }
        : { check, outcome: "failed", detail: wrong.join("; ") },
    );

  const receiptKid = await checkReceipt(file, trust, add);
  checkRow(file, add);
  const signed = await checkCheckpoint(file, trust, add);
  checkKeys(file, trust, [receiptKid, signed?.kid], add);
  checkCovered(file, signed?.payload ?? null, add);

  if (trust.anchors === null) checks.push({ check: "on_chain", outcome: "skipped", detail: "the chain was not read" });
  else if (!signed)
    checks.push({
      check: "on_chain",
      outcome: "skipped",
      detail: "not looked up: checkpoint.jws does not hold, so there is no signed shard and seq to look for",
    });
  else {
    const [ok, detail] = await checkOnChain(file, headOf(signed.payload), { ...trust, anchors: trust.anchors });
    checks.push({ check: "on_chain", outcome: ok ? "ok" : "failed", detail });
  }
  return { ok: checks.every((c) => c.outcome !== "failed"), checks };
}

const headOf = (s: SignedCheckpoint): SignedHead => ({
  shard: s.shard ?? 0,
  seq: s.seq,
  hash: s.hash,
  rowsRoot: s.rowsRoot,
});

/** A charge's payment receipt, naming the file's charge and its row: not a refund's or a payout's. Its kid, if it verifies. */
async function checkReceipt(file: EvidenceFile, trust: EvidenceTrust, add: Add): Promise<string | undefined> {
  const receipt = await verifyJws(file.receipt, trust.keys, RECEIPT_TYP);
  if (!receipt.ok) {
    add("receipt", [`receipt: the signature does not hold: ${receipt.reason}`], "");
    return undefined;
  }
  const p = receipt.payload;
  const row = file.auditRow;
  const says = "the receipt says";
  const wrong =
    p.type !== "charge"
      ? [`receipt: a ${show(p.type)} receipt, not a charge's payment receipt`]
      : [
          ...differs("chargeId", file.chargeId, p.chargeId, says),
          ...differs("auditRow.seq", row.seq, p.auditSeq, says),
          ...differs("auditRow.hash", row.hash, p.auditHash, says),
          ...differs("auditRow.amountMinor", row.amountMinor, p.amountMinor, says),
          ...differs("auditRow.amountBaseUnits", exactBaseUnitsOf(row), receiptAmount(p), says),
          ...differs("auditRow.currency", row.currency, p.currency, says),
          ...differs("auditRow.merchantId", row.merchantId, p.merchantId, says),
        ];
  add(
    "receipt",
    wrong,
    `signed by ${receipt.kid}: charge ${file.chargeId}, ${p.amountMinor === null ? `${receiptAmount(p)} base units of ${p.currency}` : `${p.amountMinor} ${p.currency} minor units`}, audit row ${row.seq}`,
  );
  return receipt.kid;
}

/**
 * The exact amount a charge receipt states: its base units, or, on a receipt signed before they
 * were in it, its cents x 10,000. Undefined when it states neither (it then differs from every row).
 */
function receiptAmount(p: Record<string, unknown>): string | undefined {
  if (typeof p.amountBaseUnits === "string") return p.amountBaseUnits;
  return typeof p.amountMinor === "number" && Number.isSafeInteger(p.amountMinor)
    ? exactBaseUnitsOf({ amountMinor: p.amountMinor })
    : undefined;
}

/** The charge's payment row, whose content hashes to its hash. */
function checkRow(file: EvidenceFile, add: Add) {
  const row = file.auditRow;
  const content = chainHash(row.prevHash, row.seq, row);
  add(
    "audit_row",
    [
      ...(content === row.hash
        ? []
        : [`auditRow: its content hashes to ${content}, not to auditRow.hash ${row.hash} (the row was changed)`]),
      ...differs("auditRow.chargeId", row.chargeId, file.chargeId, "the file's chargeId is"),
      ...differs("auditRow.type", row.type, "charge.paid", "a payment's row is"),
    ],
    `row ${row.seq} (charge.paid) hashes to ${row.hash}`,
  );
}

/** The checkpoint's signature, and every field of the file it signs (the shard too); what it signed, if it holds. */
async function checkCheckpoint(file: EvidenceFile, trust: EvidenceTrust, add: Add) {
  const verified = await verifyJws(file.checkpoint.jws, trust.keys, CHECKPOINT_TYP);
  const payload = verified.ok ? SignedCheckpoint.safeParse(verified.payload) : null;
  if (!verified.ok || !payload?.success) {
    const why = verified.ok
      ? "its signed payload is not a checkpoint's"
      : `the signature does not hold: ${verified.reason}`;
    add("checkpoint", [`checkpoint.jws: ${why}`], "");
    return null;
  }
  const s = payload.data;
  const cp = file.checkpoint;
  const says = "the signed checkpoint says";
  const shardOf = (shard: number | undefined) => (shard === undefined ? "none (shard 0)" : shard);
  add(
    "checkpoint",
    [
      ...differs("checkpoint.seq", cp.seq, s.seq, says),
      ...differs("checkpoint.hash", cp.hash, s.hash, says),
      ...differs("checkpoint.fromSeq", cp.fromSeq, s.fromSeq, says),
      ...differs("checkpoint.rowsRoot", cp.rowsRoot, s.rowsRoot, says),
      ...differs("checkpoint.signedAt", cp.signedAt, s.signedAt, says),
      ...differs("shard", shardOf(file.shard), shardOf(s.shard), says),
    ],
    `${checkpointName(headOf(s))} signed by ${verified.kid} at ${s.signedAt}`,
  );
  return { kid: verified.kid, payload: s };
}

const sameKey = (a: Record<string, unknown>, b: JWK) =>
  a.kty === b.kty && a.crv === b.crv && a.x === b.x && (a.y ?? undefined) === (b.y ?? undefined);

/**
 * The file's key set against the trusted one: a key of the file under a kid the verifier trusts must
 * be that key, and the keys that signed the receipt and the checkpoint must be in it. A key the
 * verifier no longer trusts (rotated out since) signs nothing that verified here, and is only told.
 */
function checkKeys(file: EvidenceFile, trust: EvidenceTrust, signers: (string | undefined)[], add: Add) {
  const trusted = new Map(trust.keys.keys.map((k) => [k.kid, k]));
  const inFile = new Map(file.keys.keys.map((k) => [k.kid, k]));
  const wrong: string[] = [];
  let unknown = 0;
  // Every key the file holds, in order: a second key under a kid (which a reader's map would keep or
  // drop) is refused, never passed over.
  const seen = new Set<unknown>();
  for (const key of file.keys.keys) {
    const kid = key.kid;
    if (seen.has(kid)) wrong.push(`keys: the file holds more than one key of kid ${kid}`);
    seen.add(kid);
    const known = typeof kid === "string" ? trusted.get(kid) : undefined;
    if (!known) unknown++;
    else if (!sameKey(key, known)) wrong.push(`keys: the file's key ${kid} is not the trusted key of that kid`);
  }
  for (const kid of new Set(signers))
    if (kid !== undefined && !inFile.has(kid)) wrong.push(`keys: the file's key set lacks ${kid}, which signed it`);
  const told = unknown > 0 ? ` (${unknown} not in the trusted set, signing nothing here)` : "";
  add("keys", wrong, `the file's ${file.keys.keys.length} keys agree with the trusted ones${told}`);
}

/** The row is among the checkpoint's rows, and its Merkle path leads to the root the checkpoint signed. */
function checkCovered(file: EvidenceFile, signed: SignedCheckpoint | null, add: Add) {
  const row = file.auditRow;
  // Without a signature that holds, the file's own fields: the checkpoint check has failed already.
  const cp = signed ?? file.checkpoint;
  const within = cp.fromSeq <= row.seq && row.seq <= cp.seq;
  const wrong = !within
    ? [`auditRow.seq: ${row.seq} is not among the checkpoint's rows ${cp.fromSeq}..${cp.seq}`]
    : verifyMerklePath(row.hash, file.merklePath, cp.rowsRoot)
      ? []
      : [`merklePath: it does not lead from auditRow.hash to the checkpoint's rowsRoot ${cp.rowsRoot}`];
  add(
    "covered",
    wrong,
    `row ${row.seq} is among rows ${cp.fromSeq}..${cp.seq} of the checkpoint (Merkle path of ${file.merklePath.length})`,
  );
}
