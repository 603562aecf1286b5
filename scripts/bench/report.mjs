// The benchmark's table and JSON file.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const RESULTS = fileURLToPath(new URL("../../bench/results", import.meta.url));

const fmt = (n, digits = 0) =>
  n === null || n === undefined || Number.isNaN(n)
    ? "-"
    : n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/**
 * @param {{ name: string, kind: "floor" | "scenario", result: { okRps: number, p50: number, p99: number, errors: number, threads?: { service?: { busy: number } } | null } | null,
 *   floor?: string | null, ratio?: number | null, cpuMs?: number | null, spread?: { min: number, max: number } | null,
 *   cpuRatio?: number | null, cpuSpread?: { min: number, max: number } | null, target?: string | null, met?: boolean | null,
 *   note?: string | null, notes?: (string | null)[] }[]} rows
 */
export function table(rows) {
  const header = [
    "",
    "req/s",
    "p50 ms",
    "p99 ms",
    "errors",
    "thread",
    "cpu ms",
    "floor",
    "ratio",
    "cpu ratio",
    "target",
    "met",
  ];
  const withSpread = (value, spread) =>
    value === null || value === undefined
      ? ""
      : spread
        ? `${fmt(value, 2)} (${fmt(spread.min, 2)}-${fmt(spread.max, 2)})`
        : fmt(value, 2);
  const busy = (r) => r.result?.threads?.service?.busy;
  const lines = rows.map((r) => [
    r.name,
    r.result ? fmt(r.result.okRps, r.result.okRps < 100 ? 1 : 0) : "-",
    r.result ? fmt(r.result.p50, r.result.p50 < 10 ? 1 : 0) : "-",
    r.result ? fmt(r.result.p99, r.result.p99 < 10 ? 1 : 0) : "-",
    r.result ? fmt(r.result.errors) : "-",
    busy(r) === undefined ? "-" : `${fmt(busy(r) * 100)} %`,
    r.cpuMs === null || r.cpuMs === undefined ? "-" : fmt(r.cpuMs, 2),
    r.floor ?? "",
    withSpread(r.ratio, r.spread),
    withSpread(r.cpuRatio, r.cpuSpread),
    r.target ?? "",
    r.met === null || r.met === undefined ? "" : r.met ? "yes" : "NO",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => String(l[i]).length)));
  const render = (cells) =>
    cells
      .map((c, i) => (i === 0 || i >= 7 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i])))
      .join("  ")
      .trimEnd();
  const out = [render(header), widths.map((w) => "-".repeat(w)).join("  ")];
  let kind = rows[0]?.kind;
  for (const [i, l] of lines.entries()) {
    if (rows[i].kind !== kind) {
      out.push("");
      kind = rows[i].kind;
    }
    out.push(render(l));
    for (const note of [rows[i].note, ...(rows[i].notes ?? [])]) if (note) out.push(`  ${note}`);
  }
  return out.join("\n");
}

/** Writes the run to bench/results/<timestamp>.json; returns the path. */
export function writeJson(run) {
  mkdirSync(RESULTS, { recursive: true });
  const file = path.join(RESULTS, `${run.startedAt.replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  return file;
}
