// How busy the service's processes were during a measured window, from the kernel's own
// accounting (Linux /proc/<pid>/task/<tid>/schedstat: nanoseconds on a CPU, nanoseconds runnable
// but waiting for one). workerd runs every isolate, Durable Object and the local D1 on its main
// thread, so that thread at or near 100 % says a row is bound by the service's one thread on this
// machine, not by a queue or the chain. Elsewhere than Linux there is no /proc: no process is
// found, and a window's usage is null (the table shows "-").
import { existsSync, readdirSync, readFileSync } from "node:fs";

const read = (file) => {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return null; // the process or thread ended meanwhile
  }
};

/** A /proc stat line's fields after the command name (which may hold spaces and parentheses): field 3 (state) first. */
const fieldsAfterComm = (stat) => stat.slice(stat.lastIndexOf(")") + 2).split(" ");

/** The process group of `pid` and its command name, from /proc/<pid>/stat. */
function statOf(pid) {
  const stat = read(`/proc/${pid}/stat`);
  if (!stat) return null;
  const [, , pgrp] = fieldsAfterComm(stat);
  return { comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), pgrp: Number(pgrp) };
}

/**
 * The processes of process group `pgid` worth watching, by role: workerd's entry proxy (the one
 * listening on the service's own port), the service's workerd, and anvil. A role's threads are
 * its main thread (workerd) or all of them (anvil runs on a thread pool).
 */
export function serviceProcesses(pgid, port) {
  if (!existsSync("/proc/self/stat")) return [];
  const found = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = statOf(name);
    if (!stat || stat.pgrp !== pgid) continue;
    const pid = Number(name);
    if (stat.comm === "anvil") found.push({ role: "anvil", pid, allThreads: true });
    if (stat.comm === "workerd") {
      const cmdline = (read(`/proc/${pid}/cmdline`) ?? "").split("\0");
      const proxy = cmdline.some((arg) => arg === `--socket-addr=entry=127.0.0.1:${port}`);
      found.push({ role: proxy ? "proxy" : "service", pid, allThreads: false });
    }
  }
  return found;
}

/** When a thread started (clock ticks since boot, /proc/<pid>/task/<tid>/stat field 22), or null if it is gone. */
function startTicksOf(pid, tid) {
  const stat = read(`/proc/${pid}/task/${tid}/stat`);
  return stat ? fieldsAfterComm(stat)[19] : null;
}

/**
 * Cumulative nanoseconds on a CPU and waiting for one, per thread id, of a process's main thread
 * or all its threads, with when each started (a thread id is reused once ids wrap around, and
 * anvil's pool starts and ends threads all along); null once the process is gone.
 */
function schedstatOf({ pid, allThreads }) {
  let tids = [String(pid)];
  if (allThreads) {
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      return null;
    }
  }
  const threads = {};
  for (const tid of tids) {
    const startTicks = startTicksOf(pid, tid);
    const line = read(`/proc/${pid}/task/${tid}/schedstat`);
    if (!line || startTicks === null) continue;
    const [cpuNs, waitNs] = line.trim().split(/\s+/).map(Number);
    threads[tid] = { cpuNs, waitNs, startTicks };
  }
  return Object.keys(threads).length > 0 ? threads : null;
}

/** A reading of every watched process: take one as a window starts and one as it ends. */
export function snapshot(processes) {
  return {
    atNs: process.hrtime.bigint(),
    readings: processes.map(({ role, pid, allThreads }) => ({
      role,
      pid,
      allThreads,
      threads: schedstatOf({ pid, allThreads }),
    })),
  };
}

/**
 * Each role's share of the window between two snapshots: `busy` on a CPU, `waiting` runnable but
 * without one (fractions of one core), over the threads there at both ends (a pool's thread that
 * came or went inside the window is left out, so a pool may read low; so is a thread id that names
 * another thread at the end, a newer one that started since). A process that started or
 * ended inside the window (a reload) is left out; null when nothing could be read.
 */
export function usage(before, after) {
  const windowNs = Number(after.atNs - before.atNs);
  if (!(windowNs > 0)) return null;
  const shares = {};
  for (const end of after.readings) {
    const start = before.readings.find((r) => r.pid === end.pid && r.role === end.role);
    if (!start?.threads || !end.threads) continue;
    const share = shares[end.role] ?? { busy: 0, waiting: 0 };
    for (const [tid, last] of Object.entries(end.threads)) {
      const first = start.threads[tid];
      if (!first || first.startTicks !== last.startTicks) continue;
      share.busy += (last.cpuNs - first.cpuNs) / windowNs;
      share.waiting += (last.waitNs - first.waitNs) / windowNs;
    }
    shares[end.role] = share;
  }
  return Object.keys(shares).length > 0 ? shares : null;
}

/** Measures a window: `begin()` as it opens, `end(begun)` as it closes gives `usage` (re-reading which processes there are at each start). */
export function threadMeter(pgid, port) {
  return {
    begin: () => snapshot(serviceProcesses(pgid, port)),
    end: (begun) => usage(begun, snapshot(begun.readings)),
    /** The service thread's CPU since `begun`, in ms (null when it could not be read): a step's CPU, timed alone. */
    cpuMs: (begun) => {
      const after = snapshot(begun.readings);
      const busy = usage(begun, after)?.service?.busy;
      return busy === undefined ? null : (busy * Number(after.atNs - begun.atNs)) / 1e6;
    },
  };
}

/** One progress line: "the service's thread 97 % busy (+13 % waiting for a core), the dev proxy's 30 %, anvil 25 %". */
export function describeUsage(shares) {
  if (!shares) return null;
  const pct = (x) => `${Math.round(x * 100)} %`;
  const parts = [];
  if (shares.service)
    parts.push(
      `the service's thread ${pct(shares.service.busy)} busy (+${pct(shares.service.waiting)} waiting for a core)`,
    );
  if (shares.proxy) parts.push(`the dev proxy's ${pct(shares.proxy.busy)}`);
  if (shares.anvil) parts.push(`anvil ${pct(shares.anvil.busy)}`);
  return parts.join(", ");
}
