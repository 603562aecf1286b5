// How the bench judges the issue's targets that are not a plain rate against a floor: a payment
// row's CPU against its floor's in the same pairs of windows, x402 settle's CPU against the sum of
// its necessary steps priced in the same run, and a payment across two ledger shards against one
// within a shard. docs/benchmarks.md ("The targets") says why each is computed as it is.
import { cpuMsPerOk } from "./pairs.mjs";

const x = (n) => (n === null || n === undefined ? "-" : `${n.toFixed(2)}x`);
const msOf = (n) => (n === null || n === undefined ? "-" : `${n.toFixed(2)} ms`);

/**
 * A payment row: the service thread's CPU per payment over its floor's per request, the median of
 * the pairs' ratios (pairs.mjs), at most `limit`, and no error at all. The row's floor CPU and the
 * p99 ratio (no longer judged) go in its note.
 */
export function cpuTarget(r, limit) {
  const ratio = r?.cpuRatio?.median ?? null;
  const p99 = r?.p99Ratio?.median ?? null;
  return {
    cpuRatio: ratio,
    cpuSpread: r?.cpuRatio ?? null,
    target: `cpu <= ${limit}x floor's, 0 errors`,
    met: r ? ratio !== null && ratio <= limit && r.errors === 0 : null,
    note: r
      ? `cpu ${msOf(cpuMsPerOk(r))} per payment, ${msOf(cpuMsPerOk(r.floor))} per request in its floor windows (${r.floor?.okRps?.toFixed(0) ?? "-"} req/s); p99 ${x(p99)} the floor's`
      : null,
  };
}

/**
 * The steps an x402 settlement cannot skip, each priced in the service thread's CPU in the same run:
 * the request itself (the trivial route's CPU per request under load), two D1 round trips (the
 * lookups before the checks, the reservation before the broadcast: the step "one D1 round trip"
 * alone, twice), its share of the ledger's group commit (one payment-sized batch, the D1 batch
 * floor's CPU per request less the trivial route's, over the plans per batch the row's sequencer
 * counted) and the chain's checks (the step "the chain's check batch" alone). Null parts when a
 * figure is missing (the thread is unreadable off Linux, or the ledger object restarted).
 */
export function settleSteps({ requestCpu, batchCpu, d1ReadCpu, checkBatchCpu, ledger }) {
  const plansPerBatch = ledger && ledger.batches > 0 ? ledger.plans / ledger.batches : null;
  const known = (...values) => values.every((v) => v !== null && v !== undefined && Number.isFinite(v));
  const parts = {
    request: known(requestCpu) ? requestCpu : null,
    d1RoundTrips: known(d1ReadCpu) ? 2 * d1ReadCpu : null,
    batchShare: known(batchCpu, requestCpu, plansPerBatch) ? Math.max(0, batchCpu - requestCpu) / plansPerBatch : null,
    checkBatch: known(checkBatchCpu) ? checkBatchCpu : null,
  };
  const values = Object.values(parts);
  const sumMs = values.every((v) => v !== null) ? values.reduce((a, b) => a + b, 0) : null;
  return { sumMs, plansPerBatch, parts };
}

/** x402 settle's line under the table: its CPU, the steps' sum and the parts, both ratios against their targets. */
export function settleNote(settleCpu, steps, chainRatio, { stepsLimit, chainLimit }) {
  const p = steps.parts;
  const ratio = settleCpu !== null && steps.sumMs ? settleCpu / steps.sumMs : null;
  const share = steps.plansPerBatch ? `1/${steps.plansPerBatch.toFixed(1)} of a payment batch` : "a share of a batch";
  return {
    ratio,
    text:
      `CPU ${msOf(settleCpu)}, steps ${msOf(steps.sumMs)} (request ${msOf(p.request)}, two D1 round trips ${msOf(p.d1RoundTrips)}, ` +
      `${share} ${msOf(p.batchShare)}, the chain's check batch ${msOf(p.checkBatch)}): ${x(ratio)}, target <= ${stepsLimit}x; ` +
      `chain ${chainRatio === null ? "-" : chainRatio.toFixed(2)}, target >= ${chainLimit.toFixed(1)}`,
  };
}

/**
 * A shards row's cost per payment over both databases: the sequencers' statements and D1 batches
 * (`ledgerByShard`, counted over the row's whole span) over the payments made in that span (`payments`,
 * the merchant's paid charges), and the thread's CPU per payment. Null when a count is missing.
 */
export function perPayment(raw) {
  const shards = raw?.ledgerByShard ? Object.values(raw.ledgerByShard) : [];
  const payments = raw?.payments ?? null;
  if (!(payments > 0) || shards.length === 0 || shards.some((l) => l === null)) return null;
  const sum = (f) => shards.reduce((a, l) => a + f(l), 0);
  return {
    payments,
    statements: sum((l) => l.statements) / payments,
    batches: sum((l) => l.batches) / payments,
  };
}

/**
 * A crossing payment against a same-shard one: statements, batches and CPU per payment, each at most
 * `limit` times. CPU is judged per floor (each row's CPU ratio to its own alternated floor windows,
 * across over within), so a machine that slowed between the two rows moves both; the plain ratio of
 * the two rows' CPU per payment is printed beside it.
 */
export function crossingCost(acrossRaw, withinRaw, limit) {
  const a = perPayment(acrossRaw);
  const w = perPayment(withinRaw);
  const over = (p, q) => (p !== null && q !== null && q > 0 ? p / q : null);
  const cpuAcross = cpuMsPerOk(acrossRaw);
  const cpuWithin = cpuMsPerOk(withinRaw);
  const ratios = {
    statements: over(a?.statements ?? null, w?.statements ?? null),
    batches: over(a?.batches ?? null, w?.batches ?? null),
    cpu: over(acrossRaw?.cpuRatio?.median ?? null, withinRaw?.cpuRatio?.median ?? null),
  };
  const cpuPlain = over(cpuAcross, cpuWithin);
  const judged = Object.values(ratios);
  const met = judged.some((r) => r === null) ? null : judged.every((r) => r <= limit);
  const n = (v, d = 1) => (v === null || v === undefined ? "-" : v.toFixed(d));
  const verdict = (r) => `${x(r)}, target <= ${limit}x: ${r === null ? "-" : r <= limit ? "met" : "NOT met"}`;
  const lines = [
    `per payment over both databases: ${n(a?.statements)} statements against ${n(w?.statements)} within (${verdict(ratios.statements)})`,
    `per payment over both databases: ${n(a?.batches, 2)} D1 batches against ${n(w?.batches, 2)} within (${verdict(ratios.batches)})`,
    `cpu ${msOf(cpuAcross)} per payment against ${msOf(cpuWithin)} within (${x(cpuPlain)}); per floor ${verdict(ratios.cpu)}`,
  ];
  return {
    acrossMeasured: Boolean(acrossRaw),
    across: a,
    within: w,
    cpuAcross,
    cpuWithin,
    ratios,
    cpuPlain,
    met,
    lines,
  };
}

/** The summary line of one target: its figure and whether it is met ("-": not measured, or a figure it needs is missing). */
export function summaryLine({ target, figure, measured, met }) {
  const verdict =
    met === null || met === undefined
      ? measured
        ? "- (cannot be judged: a figure it needs is missing)"
        : "- (not measured in this run)"
      : met
        ? "met"
        : "NOT met";
  return `target ${target}${figure ? ` (${figure})` : ""}: ${verdict}`;
}
