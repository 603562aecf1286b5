// A payment row judged against its floor in one run: the floor (one DO RPC running one
// payment-sized batch) and the row take turns in short windows (floor, row, floor, row, ...), so a
// machine that slows down or speeds up during the run moves both sides of every pair alike. The
// row's ratio is the median of the pairs' ratios, with their spread (lowest, highest).

/** The median of numbers (the mean of the middle two for an even count); null for none. */
export function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** A statistic over the pairs: its median and its spread. */
export function spreadOf(values) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return null;
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

/** Each process role's usage over several windows, weighted by each window's length. */
function combinedThreads(windows) {
  const total = windows.reduce((s, w) => s + (w.threads ? w.seconds : 0), 0);
  if (!(total > 0)) return null;
  const shares = {};
  for (const w of windows) {
    if (!w.threads) continue;
    for (const [role, share] of Object.entries(w.threads)) {
      shares[role] ??= { busy: 0, waiting: 0 };
      const into = shares[role];
      into.busy += (share.busy * w.seconds) / total;
      into.waiting += (share.waiting * w.seconds) / total;
    }
  }
  return shares;
}

/**
 * Several measured windows of one load as one result: counts and statuses added up, rates over the
 * windows' total time, latencies the median of the windows' own (autocannon gives percentiles, not
 * the histogram), max the largest.
 */
export function combined(windows) {
  const sum = (f) => windows.reduce((s, w) => s + f(w), 0);
  const seconds = sum((w) => w.seconds);
  const statuses = {};
  for (const w of windows)
    for (const [code, n] of Object.entries(w.statuses)) statuses[code] = (statuses[code] ?? 0) + n;
  return {
    requests: sum((w) => w.requests),
    ok: sum((w) => w.ok),
    errors: sum((w) => w.errors),
    rps: sum((w) => w.requests) / seconds,
    okRps: sum((w) => w.ok) / seconds,
    p50: median(windows.map((w) => w.p50)),
    p90: median(windows.map((w) => w.p90)),
    p99: median(windows.map((w) => w.p99)),
    max: Math.max(...windows.map((w) => w.max)),
    mean:
      sum((w) => w.mean * w.requests) /
      Math.max(
        1,
        sum((w) => w.requests),
      ),
    statuses,
    socketErrors: sum((w) => w.socketErrors),
    timeouts: sum((w) => w.timeouts),
    unanswered: sum((w) => w.unanswered),
    seconds,
    threads: combinedThreads(windows),
  };
}

/** The service thread's CPU per expected answer in a window, in ms; null without the thread's figures or any answer. */
export function cpuMsPerOk(result) {
  const busy = result?.threads?.service?.busy;
  if (busy === undefined || !(result.ok > 0)) return null;
  return (busy * result.seconds * 1000) / result.ok;
}

const brief = (r) => ({
  okRps: r.okRps,
  p50: r.p50,
  p99: r.p99,
  errors: r.errors,
  seconds: r.seconds,
  serviceThreadBusy: r.threads?.service?.busy ?? null,
  cpuMs: cpuMsPerOk(r),
});

/** The row's CPU per answer over the floor's, in one pair of windows; null when either is unknown. */
function cpuRatioOf(row, floor) {
  const r = cpuMsPerOk(row);
  const f = cpuMsPerOk(floor);
  return r !== null && f !== null && f > 0 ? r / f : null;
}

/**
 * Runs `pairs` pairs of windows of `seconds` each, floor first. The first window of each side
 * starts with its own warm-up (the options' `warmupSeconds` and `afterWarmup`); `between` runs
 * before every window (waiting for the service's queued work). Returns the row's windows combined,
 * with `pairs` (each pair's floor, row, ratio of req/s, ratio of p99 and ratio of the service thread's
 * CPU per answer, row over floor), `ratio`, `p99Ratio` and `cpuRatio` (median, min, max over the
 * pairs) and `floor` (the floor's windows combined).
 */
export async function alternate({ load, floorOptions, rowOptions, pairs, seconds, between, log }) {
  const floors = [];
  const rows = [];
  for (let k = 0; k < pairs; k++) {
    const first = k === 0;
    // The row's own measure() waited for a quiet service before the first window.
    if (!first) await between();
    const f = await load({
      ...floorOptions,
      seconds,
      warmupSeconds: first ? floorOptions.warmupSeconds : 0,
    });
    await between();
    const r = await load({
      ...rowOptions,
      seconds,
      warmupSeconds: first ? rowOptions.warmupSeconds : 0,
      afterWarmup: first ? rowOptions.afterWarmup : undefined,
    });
    floors.push(f);
    rows.push(r);
    log?.(
      `  pair ${k + 1}/${pairs}: floor ${f.okRps.toFixed(0)} req/s (p99 ${f.p99} ms), row ${r.okRps.toFixed(0)} req/s (p99 ${r.p99} ms): ` +
        `ratio ${(f.okRps > 0 ? r.okRps / f.okRps : Number.NaN).toFixed(2)}`,
    );
  }
  const pairList = rows.map((r, k) => ({
    floor: brief(floors[k]),
    row: brief(rows[k]),
    ratio: floors[k].okRps > 0 ? r.okRps / floors[k].okRps : null,
    p99Ratio: floors[k].p99 > 0 ? r.p99 / floors[k].p99 : null,
    cpuRatio: cpuRatioOf(r, floors[k]),
  }));
  return {
    ...combined(rows),
    pairs: pairList,
    ratio: spreadOf(pairList.map((p) => p.ratio)),
    p99Ratio: spreadOf(pairList.map((p) => p.p99Ratio)),
    cpuRatio: spreadOf(pairList.map((p) => p.cpuRatio)),
    floor: combined(floors),
  };
}
