import type { JWK } from "jose";
import type { ArchivedLedgerEntry } from "../ledger/archiving";
import { type AuditRow, auditRow, verifyChain } from "../ledger/chain";
import { namesShard } from "../ledger/shard-labels";
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { verifyJws } from "../proofs/keys";

/*
 * An archive segment: audit rows and ledger entries moved from D1 to R2 (src/archive/), as NDJSON.
 * Line 1 is the header; then `rows` audit rows in seq order (exactly the fields of AuditRow, as
 * canonical JSON, so the chain recomputes), then `entries` ledger entries in id order. The header
 * names the row before the segment (`prevHash`) and its last row (`lastHash`), so segments link
 * like the rows do; its JWS signs every other header field, `bodySha256` being the SHA-256 of all
 * lines after the header (each ending in "\n").
 */

export const ARCHIVE_SEGMENT_TYP = "agent-pay-archive-segment+jwt";
export const ARCHIVE_SEGMENT_FORMAT = "agent-pay-archive-segment/1";

/** A segment's ledger entries: the ledger's own (src/ledger/archiving.ts reads them). */
export type { ArchivedLedgerEntry };

/** What the JWS signs: the segment's bounds, links and body hash. */
export interface SegmentClaims {
  format: typeof ARCHIVE_SEGMENT_FORMAT;
  firstSeq: number;
  lastSeq: number;
  prevHash: string;
  lastHash: string;
  rows: number;
  afterEntryId: number;
  lastEntryId: number;
  entries: number;
  bodySha256: string;
  archivedAt: string;
}

export interface SegmentHeader extends SegmentClaims {
  jws: string;
}

export interface Segment {
  header: SegmentHeader;
  rows: AuditRow[];
  entries: ArchivedLedgerEntry[];
}

/**
 * The R2 key of the segment starting at `firstSeq`: zero-padded so keys sort by seq. Ledger shard
 * k ≥ 1 keeps its segments under `audit/shard-<k>/`: seqs repeat between shards, keys must not.
 */
export const segmentKey = (firstSeq: number, lastSeq: number, shard = 0) =>
  `audit/${namesShard(shard) ? `shard-${shard}/` : ""}${String(firstSeq).padStart(15, "0")}-${String(lastSeq).padStart(15, "0")}.ndjson`;

const entryLine = (e: ArchivedLedgerEntry) =>
  canonicalJson({
    id: e.id,
    transferId: e.transferId,
    account: e.account,
    amountMinor: e.amountMinor,
    ...(e.amountBaseUnits === undefined ? {} : { amountBaseUnits: e.amountBaseUnits }),
    createdAt: e.createdAt,
  });

/** The lines after the header; the same rows and entries always make the same bytes. */
export const segmentBody = (rows: AuditRow[], entries: ArchivedLedgerEntry[]) =>
  [...rows.map((r) => canonicalJson(r)), ...entries.map(entryLine)].map((line) => `${line}\n`).join("");

/** The claims a segment of these rows and entries signs. */
export async function segmentClaims(
  bounds: { firstSeq: number; lastSeq: number; prevHash: string; afterEntryId: number; lastEntryId: number },
  rows: AuditRow[],
  entries: ArchivedLedgerEntry[],
  archivedAt: string,
): Promise<{ claims: SegmentClaims; body: string }> {
  const body = segmentBody(rows, entries);
  const claims: SegmentClaims = {
    format: ARCHIVE_SEGMENT_FORMAT,
    firstSeq: bounds.firstSeq,
    lastSeq: bounds.lastSeq,
    prevHash: bounds.prevHash,
    lastHash: rows[rows.length - 1]?.hash ?? bounds.prevHash,
    rows: rows.length,
    afterEntryId: bounds.afterEntryId,
    lastEntryId: bounds.lastEntryId,
    entries: entries.length,
    bodySha256: await sha256Hex(body),
    archivedAt,
  };
  return { claims, body };
}

/** The whole object: header line, then body. */
export const segmentText = (claims: SegmentClaims, jws: string, body: string) =>
  `${canonicalJson({ ...claims, jws })}\n${body}`;

/** Parses an object's text; throws on a malformed one. */
export function parseSegment(text: string): Segment & { body: string } {
  const cut = text.indexOf("\n");
  if (cut < 0) throw new Error("archive segment has no header line");
  const header = JSON.parse(text.slice(0, cut)) as SegmentHeader;
  const body = text.slice(cut + 1);
  const lines = body === "" ? [] : body.slice(0, -1).split("\n");
  if (!body.endsWith("\n") && body !== "") throw new Error("archive segment body is truncated");
  if (lines.length !== header.rows + header.entries)
    throw new Error(
      `archive segment ${header.firstSeq} has ${lines.length} lines, its header says ${header.rows + header.entries}`,
    );
  const rows = lines.slice(0, header.rows).map((l) => {
    const row = JSON.parse(l) as AuditRow;
    return auditRow(row, row.data);
  });
  const entries = lines.slice(header.rows).map((l) => JSON.parse(l) as ArchivedLedgerEntry);
  return { header, rows, entries, body };
}

/**
 * A segment's audit rows from its lines as they stream in (src/lib/lines.ts): the header, then its
 * `rows` rows, each as parseSegment gives it; the ledger entries after them are never read. A reader
 * of the chain then holds one row of a segment, not the object. Throws when the rows end early.
 */
export async function* segmentRowsOf(lines: AsyncIterable<string>): AsyncGenerator<AuditRow> {
  let header: SegmentHeader | null = null;
  let read = 0;
  for await (const line of lines) {
    if (!header) {
      header = JSON.parse(line) as SegmentHeader;
      if (header.rows === 0) return;
      continue;
    }
    const row = JSON.parse(line) as AuditRow;
    yield auditRow(row, row.data);
    if (++read === header.rows) return;
  }
  throw new Error(
    header
      ? `archive segment ${header.firstSeq} ends after ${read} of its ${header.rows} rows`
      : "archive segment is empty",
  );
}

/**
 * Everything that must hold of a segment read back: the body's hash, the counts, the seq and entry
 * bounds, the chain recomputed from `prevHash` to `lastHash`, and the signature over the header.
 * Null when it holds, else what does not.
 */
export async function segmentProblem(
  text: string,
  expected: { firstSeq: number; lastSeq: number; prevHash: string; afterEntryId: number; lastEntryId: number },
  jwks: { keys: JWK[] },
): Promise<string | null> {
  let segment: ReturnType<typeof parseSegment>;
  try {
    segment = parseSegment(text);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  const { header, rows, entries, body } = segment;
  if ((await sha256Hex(body)) !== header.bodySha256) return "body does not match bodySha256";
  for (const key of ["firstSeq", "lastSeq", "prevHash", "afterEntryId", "lastEntryId"] as const)
    if (header[key] !== expected[key]) return `${key} is ${header[key]}, expected ${expected[key]}`;
  if (rows.length !== header.lastSeq - header.firstSeq + 1) return "row count does not match the seq range";
  const chain = await verifyChain(rows, { seq: header.firstSeq - 1, hash: header.prevHash });
  if (!chain.ok) return `chain broken at ${chain.brokenSeq}: ${chain.problem}`;
  if (chain.headHash !== header.lastHash) return "lastHash is not the last row's hash";
  let lastId = header.afterEntryId;
  for (const e of entries) {
    if (e.id <= lastId || e.id > header.lastEntryId) return `ledger entry ${e.id} out of order or bounds`;
    lastId = e.id;
  }
  const { jws, ...claims } = header;
  const verdict = await verifyJws(jws, jwks, ARCHIVE_SEGMENT_TYP);
  if (!verdict.ok) return `signature: ${verdict.reason}`;
  if (canonicalJson(verdict.payload) !== canonicalJson(claims)) return "the JWS signs other fields than the header's";
  return null;
}
