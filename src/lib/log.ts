import { ID_PREFIXES } from "./ids";

/**
 * The service's log lines: one JSON object each, `{ level, where, ...fields }`,
 * where `where` names the event (operators and tests search for it). Requests
 * are never logged, only what went wrong, and a credential that slips into a
 * message is masked before it is written.
 */
type Level = "error" | "warn" | "info";
type Fields = Record<string, unknown> & { error?: unknown };

/** Longest error text kept in a log line. */
const MAX_ERROR_CHARS = 300;

/** An error as one short line: `Name: message` (viem's short message when it has one), first line only. */
export function errorText(error: unknown): string {
  const text =
    error instanceof Error
      ? `${error.name}: ${(error as { shortMessage?: string }).shortMessage ?? error.message}`
      : String(error);
  return text.split("\n")[0]!.slice(0, MAX_ERROR_CHARS);
}

const SECRET_PREFIXES = [ID_PREFIXES.merchantKey, ID_PREFIXES.agentKey, ID_PREFIXES.webhookSecret];
const CREDENTIAL = new RegExp(
  [
    ...SECRET_PREFIXES.map((prefix) => `${prefix}[A-Za-z0-9_-]+`),
    // A bearer token or a JWT (console sessions, Access assertions).
    "Bearer\\s+[^\\s\"']+",
    "eyJ[A-Za-z0-9_-]*\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]*",
  ].join("|"),
  "g",
);

/** A field whose name says it holds a secret is never written, whatever its value. */
const SECRET_FIELD = /secret|token|password|authorization|api_?key|private_?key|mnemonic/i;

function write(level: Level, where: string, fields: Fields): void {
  const entry: Record<string, unknown> = { level, where };
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined || SECRET_FIELD.test(name)) continue;
    entry[name] = name === "error" ? errorText(value) : value;
  }
  const line = JSON.stringify(entry).replace(CREDENTIAL, "[redacted]");
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
}

export const log = {
  /** Something failed and someone should look. */
  error: (where: string, fields: Fields = {}) => write("error", where, fields),
  /** Something failed that the service recovers from by itself (a retry, the cron). */
  warn: (where: string, fields: Fields = {}) => write("warn", where, fields),
  info: (where: string, fields: Fields = {}) => write("info", where, fields),
};
