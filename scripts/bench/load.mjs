// Drives one scenario with autocannon: a warm-up whose numbers are dropped, then the measured run,
// both at a fixed concurrency. Every response status is counted; what the scenario expects is
// success, anything else is an error.
import autocannon from "autocannon";

/**
 * @typedef {{ method?: string, path: string, headers?: Record<string, string>, body?: string }} RequestSpec
 * @typedef {{
 *   url: string,
 *   connections: number,
 *   warmupSeconds: number,
 *   seconds: number,
 *   warmupRequests?: number,
 *   requests?: number,
 *   next: () => RequestSpec,
 *   expect?: (status: number) => boolean,
 *   overallRate?: number,
 *   onResponse?: (status: number, body: string) => void,
 *   afterWarmup?: (warmup: { okRps: number }) => Promise<void>,
 *   meter?: { begin: () => unknown, end: (begun: unknown) => unknown },
 * }} LoadOptions
 * @typedef {{
 *   requests: number, ok: number, errors: number, rps: number, okRps: number,
 *   p50: number, p90: number, p99: number, max: number, mean: number,
 *   statuses: Record<string, number>, socketErrors: number, timeouts: number, unanswered: number, seconds: number,
 *   threads: unknown,
 * }} LoadResult
 */

function once(options, next) {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: options.url,
        connections: options.connections,
        // A number of requests when given (then the duration is what they took), else seconds.
        // autocannon notices the last answer only at its next sample, so it samples every 20 ms
        // then; at the default second the duration, and so the rate, erred by up to a second.
        ...(options.amount ? { amount: options.amount, sampleInt: 20 } : { duration: options.seconds }),
        overallRate: options.overallRate,
        timeout: 30,
        requests: [
          {
            setupRequest: (request) => {
              const spec = next();
              return {
                ...request,
                method: spec.method ?? "GET",
                path: spec.path,
                headers: { ...spec.headers },
                body: spec.body,
              };
            },
            onResponse: options.onResponse ? (status, body) => options.onResponse(status, body) : undefined,
          },
        ],
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
  });
}

/** Warm-up, then the measured run. @param {LoadOptions} options @returns {Promise<LoadResult>} */
export async function load(options) {
  const expect = options.expect ?? ((status) => status >= 200 && status < 300);
  const okOf = (statuses) =>
    Object.entries(statuses).reduce((sum, [code, n]) => sum + (expect(Number(code)) ? n : 0), 0);
  const statusesOf = (result) =>
    Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]));
  if (options.warmupSeconds > 0 || options.warmupRequests) {
    const warm = await once(
      { ...options, seconds: options.warmupSeconds, amount: options.warmupRequests },
      options.next,
    );
    // The warm-up's rate tells how many prepared inputs (pending charges, signed payments) the run needs.
    await options.afterWarmup?.({ okRps: okOf(statusesOf(warm)) / warm.duration });
  }
  // What the service's processes did during the measured run alone (scripts/bench/threads.mjs).
  const begun = options.meter?.begin();
  const result = await once({ ...options, amount: options.requests }, options.next);
  const threads = options.meter ? options.meter.end(begun) : null;
  const statuses = statusesOf(result);
  const responses = Object.values(statuses).reduce((a, b) => a + b, 0);
  const ok = okOf(statuses);
  const seconds = result.duration;
  // Requests still in flight when the window closed: up to one per connection is normal; a run
  // with no answer at all means every request took longer than the window, which is an error.
  const unanswered = Math.max(0, result.requests.sent - responses - result.errors);
  return {
    requests: responses,
    ok,
    // Refused connections and timeouts (autocannon counts those among its errors) are errors as much as a bad status.
    errors: responses - ok + result.errors + (responses === 0 ? unanswered : 0),
    rps: responses / seconds,
    okRps: ok / seconds,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    max: result.latency.max,
    mean: result.latency.mean,
    statuses,
    socketErrors: result.errors,
    timeouts: result.timeouts,
    unanswered,
    seconds,
    threads,
  };
}
