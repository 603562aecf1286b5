import { sha256HexSync } from "../lib/crypto";
import { appendRows, mergeAppends, type AuditDraft, type SqlStatement } from "./plan";

export const GENESIS_HASH = "0".repeat(64);

/** An audit row as stored and exported. */
export interface AuditRow extends AuditDraft {
  seq: number;
  prevHash: string;
  hash: string;
}

/** JSON with object keys sorted at every depth, so equal content hashes equally. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

/** The content a row's hash covers: everything but the hashes themselves. */
export function auditContent(seq: number, draft: AuditDraft): string {
  return canonicalJson({
    seq,
    type: draft.type,
    reference: draft.reference,
    chargeId: draft.chargeId,
    agentId: draft.agentId,
    merchantId: draft.merchantId,
    amountMinor: draft.amountMinor,
    currency: draft.currency,
    data: draft.data,
    createdAt: draft.createdAt,
  });
}

/** hash = SHA-256(prevHash "\n" canonical content). */
export const chainHash = (prevHash: string, seq: number, draft: AuditDraft) =>
  sha256HexSync(`${prevHash}\n${auditContent(seq, draft)}`);

export type ChainVerdict =
  | { ok: true; rows: number; headSeq: number; headHash: string }
  | { ok: false; rows: number; brokenSeq: number; problem: "seq_gap" | "prev_hash_mismatch" | "hash_mismatch" };

/**
 * Recomputes a chain segment. `start` is the row before the segment (genesis
 * when verifying from the beginning). Names the first broken row, if any.
 */
export async function verifyChain(
  rows: Iterable<AuditRow> | AsyncIterable<AuditRow>,
  start = { seq: 0, hash: GENESIS_HASH },
): Promise<ChainVerdict> {
  let prev = start;
  let count = 0;
  for await (const row of rows) {
    count++;
    if (row.seq !== prev.seq + 1) return { ok: false, rows: count, brokenSeq: row.seq, problem: "seq_gap" };
    if (row.prevHash !== prev.hash)
      return { ok: false, rows: count, brokenSeq: row.seq, problem: "prev_hash_mismatch" };
    if (chainHash(row.prevHash, row.seq, row) !== row.hash)
      return { ok: false, rows: count, brokenSeq: row.seq, problem: "hash_mismatch" };
    prev = { seq: row.seq, hash: row.hash };
  }
  return { ok: true, rows: count, headSeq: prev.seq, headHash: prev.hash };
}

const AUDIT_INSERT =
  "INSERT INTO audit_events (seq, type, reference, charge_id, agent_id, merchant_id, amount_minor, currency, data, created_at, prev_hash, hash)";

/** The inserts of audit rows, in order, as many to an insert as D1's parameter limit allows (none for no rows). */
export const auditInserts = (rows: AuditRow[]): SqlStatement[] =>
  mergeAppends(
    rows.map((row) =>
      appendRows(AUDIT_INSERT, 12, [
        [
          row.seq,
          row.type,
          row.reference,
          row.chargeId,
          row.agentId,
          row.merchantId,
          row.amountMinor,
          row.currency,
          canonicalJson(row.data),
          row.createdAt,
          row.prevHash,
          row.hash,
        ],
      ]),
    ),
  );
