import type { AuditRow } from "../ledger/audit";
import { canonicalJson } from "../ledger/audit";

export const CSV_COLUMNS = ["seq", "createdAt", "type", "reference", "chargeId", "agentId", "merchantId", "amountMinor", "currency", "data", "prevHash", "hash"] as const;

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
