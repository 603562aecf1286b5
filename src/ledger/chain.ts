import { appendRows, mergeAppends, type SqlStatement } from "../db/statements";
import { canonicalJson } from "../lib/canonical-json";
import { sha256HexSync } from "../lib/crypto";

/*
 * The audit chain: every row names its predecessor's hash, so a changed,
 * dropped or inserted row breaks it. The ledger's sequencer appends the rows
 * (ledger/ledger.do.ts); the export and verification (src/audit) read them back.
 */

/** An audit event a commit plan asks the sequencer to append, before it has a place in the chain. */
export interface AuditDraft {
  type: string;
  reference: string | null;
  chargeId: string | null;
  agentId: string | null;
  merchantId: string | null;
  amountMinor: number;
  currency: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export const GENESIS_HASH = "0".repeat(64);

/**
 * The hash the chain of ledger shard `shard` starts from: shard 0's is all zeros, as it always was;
 * each other shard's is its own, so two shards' chains never share a first link.
 */
export const genesisHashOf = (shard: number) =>
  shard === 0 ? GENESIS_HASH : sha256HexSync(`agent-pay:ledger-shard:${shard}`);

/** An audit row as stored and exported. */
export interface AuditRow extends AuditDraft {
  seq: number;
  prevHash: string;
  hash: string;
}

/**
 * A row in the one field order every reader gives it, from D1 or from an archived segment (stored as
 * canonical JSON, keys sorted), so an audit page or an evidence file is the same bytes either way.
 */
export const auditRow = (r: Omit<AuditRow, "data">, data: Record<string, unknown>): AuditRow => ({
  seq: r.seq,
  type: r.type,
  reference: r.reference,
  chargeId: r.chargeId,
  agentId: r.agentId,
  merchantId: r.merchantId,
  amountMinor: r.amountMinor,
  currency: r.currency,
  data,
  createdAt: r.createdAt,
  prevHash: r.prevHash,
  hash: r.hash,
});

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
