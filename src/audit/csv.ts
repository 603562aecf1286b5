import type { HistoryStore } from "./archived";
import type { AuditRow } from "./chain";
import { canonicalJson } from "../lib/canonical-json";
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

export const csvHeader = () => `${CSV_COLUMNS.join(",")}\r\n`;

export function csvRow(row: AuditRow): string {
  const values: Record<(typeof CSV_COLUMNS)[number], unknown> = { ...row, data: canonicalJson(row.data) };
  return `${CSV_COLUMNS.map((column) => csvField(values[column])).join(",")}\r\n`;
}

/** The audit chain of a date range as a streamed CSV download: an export of a long range never sits in memory whole. */
export function csvExportResponse(
  store: HistoryStore,
  range: { fromDay: string; toDay: string; fromIso: string; toIso: string },
): Response {
  const encoder = new TextEncoder();
  const rows = auditRows(store, { range });
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(csvHeader()));
    },
    async pull(controller) {
      const next = await rows.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(csvRow(next.value)));
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/csv; charset=utf-8",
      "content-disposition": `attachment; filename="transactions-${range.fromDay}-${range.toDay}.csv"`,
      "cache-control": "no-store",
    },
  });
}
