import type { Env } from "../config/env";
import type { AuditRow } from "../ledger/chain";
import { type Place, placementOf } from "../ledger/place";
import { placeNumbered } from "../ledger/place-numbered";
import { shardLabel } from "../ledger/shard-labels";
import { canonicalJson } from "../lib/canonical-json";
import { exactBaseUnitsOf } from "../lib/money";
import type { HistoryStore } from "./archived";
import { auditRows } from "./service";

export const CSV_COLUMNS = [
  "seq",
  "createdAt",
  "type",
  "reference",
  "chargeId",
  "agentId",
  "merchantId",
  "amountMinor",
  "currency",
  "data",
  "prevHash",
  "hash",
] as const;

/** RFC 4180 quoting; a leading formula character is neutralised so spreadsheets never execute a cell. */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return "";
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text) && typeof value === "string") text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * With more than one ledger shard, each row names its shard: seqs of two shards do not compare.
 * The exact amount came later, so it is the last column: every column before it is where it was.
 */
export const csvHeader = (sharded = false) => `${CSV_COLUMNS.join(",")}${sharded ? ",shard" : ""},amountBaseUnits\r\n`;

/**
 * One row. `amountMinor` is empty when the amount is not a whole number of cents (the row states
 * null: no cell ever holds a rounded amount); `amountBaseUnits` is always the exact amount, for a
 * row written before amounts below a cent existed its cents x 10,000.
 */
export function csvRow(row: AuditRow, shard?: number): string {
  const values: Record<(typeof CSV_COLUMNS)[number], unknown> = { ...row, data: canonicalJson(row.data) };
  const fields = CSV_COLUMNS.map((column) => csvField(values[column]));
  if (shard !== undefined) fields.push(String(shard));
  fields.push(exactBaseUnitsOf(row));
  return `${fields.join(",")}\r\n`;
}

type Range = { fromDay: string; toDay: string; fromIso: string; toIso: string };

/** The history of the place `at`: its database and the archive bucket (its segments are listed in its database). */
const storeOf = (env: Env, at: Place): HistoryStore => ({ DB: at.db, ARCHIVE: env.ARCHIVE });

/**
 * The rows of every shard in one stream, each with its shard: each shard's rows in their seq order
 * (so a shard's chain can be followed down the file), and of the shards' next rows the earliest
 * (createdAt, then shard, then seq) first. Seqs of different shards do not compare; time does. One
 * page per shard is held at a time.
 */
async function* mergedRows(env: Env, places: Place[], range: Range): AsyncGenerator<{ row: AuditRow; shard: number }> {
  // Each row is shown with its shard's number, the file's last column.
  const sources = places.map((at) => ({ label: shardLabel(at), rows: auditRows(storeOf(env, at), { range }) }));
  const heads = await Promise.all(sources.map(async (s) => (await s.rows.next()).value as AuditRow | undefined));
  for (;;) {
    let pick = -1;
    for (const [i, head] of heads.entries()) {
      if (!head) continue;
      const best = pick < 0 ? undefined : heads[pick]!;
      // Shards are visited in order, so on equal times the lower shard (seen first) stays the pick.
      if (!best || head.createdAt < best.createdAt) pick = i;
    }
    if (pick < 0) return;
    yield { row: heads[pick]!, shard: sources[pick]!.label };
    heads[pick] = (await sources[pick]!.rows.next()).value as AuditRow | undefined;
  }
}

/**
 * The audit chain of a date range as a streamed CSV download: an export of a long range never sits in
 * memory whole. With one ledger shard it is the chain, as it always was. With more, a trailing
 * `shard` column, and either every shard merged by time, or `shard`'s rows alone: one complete chain
 * that verifies by itself from that shard's genesis.
 */
export function csvExportResponse(env: Env, range: Range, options: { shard?: number } = {}): Response {
  const encoder = new TextEncoder();
  const { sharded } = placementOf(env);
  const places = placesToExport(env, options.shard);
  const rows: AsyncGenerator<{ row: AuditRow; shard?: number }> = !sharded
    ? (async function* () {
        for await (const row of auditRows(storeOf(env, places[0]!), { range })) yield { row };
      })()
    : mergedRows(env, places, range);
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(csvHeader(sharded)));
    },
    async pull(controller) {
      const next = await rows.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(csvRow(next.value.row, next.value.shard)));
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/csv; charset=utf-8",
      "content-disposition": `attachment; filename="transactions-${range.fromDay}-${range.toDay}${sharded && options.shard !== undefined ? `-shard-${options.shard}` : ""}.csv"`,
      "cache-control": "no-store",
    },
  });
}

/** Every place, or the one the request names by its number (the route refused a shard not run here). */
function placesToExport(env: Env, shard: number | undefined): Place[] {
  if (shard === undefined) return placementOf(env).each();
  const at = placeNumbered(env, shard);
  if (!at) throw new Error(`ledger shard ${shard} is not run by this deployment`);
  return [at];
}
