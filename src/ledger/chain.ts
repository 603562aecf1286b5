import { appendRows, mergeAppends, type SqlStatement } from "../db/statements";
import { canonicalJson } from "../lib/canonical-json";
import { sha256HexSync } from "../lib/crypto";
import { centsIfWhole, centsToUsdcUnits, USDC_UNITS_PER_CENT, wholeCentsOf } from "../lib/money";

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
  /** The amount in cents; null when it is not a whole number of them (`amountBaseUnits` states it). */
  amountMinor: number | null;
  /**
   * The exact amount in base units, as a decimal string. A draft without it moves whole cents: the
   * sequencer writes `amountMinor` × 10,000 (`sealed`). Null only on rows written before amounts
   * below a cent existed; their hash never covered it.
   */
  amountBaseUnits?: string | null;
  currency: string;
  data: Record<string, unknown>;
  createdAt: string;
}

/** A draft as the chain records it: its exact amount always stated, its cents null unless whole. */
export function sealed(draft: AuditDraft): AuditDraft & { amountBaseUnits: string } {
  const units =
    draft.amountBaseUnits ?? (draft.amountMinor === null ? null : String(centsToUsdcUnits(draft.amountMinor)));
  if (units === null) throw new Error(`audit draft ${draft.type} states no amount`);
  return { ...draft, amountMinor: centsIfWhole(BigInt(units)), amountBaseUnits: units };
}

export const GENESIS_HASH = "0".repeat(64);

/**
 * The hash the chain of ledger shard `shard` starts from: shard 0's is all zeros, as it always was;
 * each other shard's is its own, so two shards' chains never share a first link.
 */
export const genesisHashOf = (shard: number) =>
  shard === 0 ? GENESIS_HASH : sha256HexSync(`agent-pay:ledger-shard:${shard}`);

/** An audit row as stored and exported. */
export interface AuditRow extends Omit<AuditDraft, "amountBaseUnits"> {
  /** Absent on rows written before amounts below a cent existed. */
  amountBaseUnits?: string;
  seq: number;
  prevHash: string;
  hash: string;
}

/**
 * A row in the one field order every reader gives it, from D1 or from an archived segment (stored as
 * canonical JSON, keys sorted), so an audit page or an evidence file is the same bytes either way.
 */
export const auditRow = (
  r: Omit<AuditRow, "data" | "amountBaseUnits"> & { amountBaseUnits?: string | null },
  data: Record<string, unknown>,
): AuditRow => ({
  seq: r.seq,
  type: r.type,
  reference: r.reference,
  chargeId: r.chargeId,
  agentId: r.agentId,
  merchantId: r.merchantId,
  // Stored, a row's cents column holds whole cents (NOT NULL); the row states null when they are not its amount.
  amountMinor:
    r.amountBaseUnits != null && BigInt(r.amountBaseUnits) % USDC_UNITS_PER_CENT !== 0n ? null : r.amountMinor,
  ...(r.amountBaseUnits != null ? { amountBaseUnits: r.amountBaseUnits } : {}),
  currency: r.currency,
  data,
  createdAt: r.createdAt,
  prevHash: r.prevHash,
  hash: r.hash,
});

/**
 * The content a row's hash covers: everything but the hashes themselves. `amountBaseUnits` is in it
 * whenever the row states it (every row since amounts below a cent exist), so older rows hash as they always did.
 */
export function auditContent(seq: number, draft: AuditDraft): string {
  return canonicalJson({
    seq,
    type: draft.type,
    reference: draft.reference,
    chargeId: draft.chargeId,
    agentId: draft.agentId,
    merchantId: draft.merchantId,
    amountMinor: draft.amountMinor,
    ...(draft.amountBaseUnits != null ? { amountBaseUnits: draft.amountBaseUnits } : {}),
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
  "INSERT INTO audit_events (seq, type, reference, charge_id, agent_id, merchant_id, amount_minor, amount_base_units, currency, data, created_at, prev_hash, hash)";

/** The inserts of audit rows, in order, as many to an insert as D1's parameter limit allows (none for no rows). */
export const auditInserts = (rows: AuditRow[]): SqlStatement[] =>
  mergeAppends(
    rows.map((row) =>
      appendRows(AUDIT_INSERT, 13, [
        [
          row.seq,
          row.type,
          row.reference,
          row.chargeId,
          row.agentId,
          row.merchantId,
          // The column holds whole cents (NOT NULL); the row states null for an amount between cents.
          row.amountMinor ?? wholeCentsOf(BigInt(row.amountBaseUnits ?? 0)),
          row.amountBaseUnits ?? null,
          row.currency,
          canonicalJson(row.data),
          row.createdAt,
          row.prevHash,
          row.hash,
        ],
      ]),
    ),
  );
