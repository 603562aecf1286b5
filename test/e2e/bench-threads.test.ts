import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeUsage, serviceProcesses, snapshot, usage, type WatchedProcess } from "../../scripts/bench/threads.mjs";
import { type DevServer, startDevServer } from "./dev-server";

// `npm run bench`'s thread column reads the kernel's accounting of real processes (Linux /proc).
const linux = existsSync("/proc/self/schedstat");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A Node process running `code`, once it has started: `code` calls `ready()` when it does what the test
 * watches (spins, sleeps). Node's own start takes a while and uses a CPU: a fixed wait for it is too
 * short on a loaded machine, and a window that opens during it sees a sleeper busy or a spinner idle.
 */
async function node(code: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", `const ready = () => process.stdout.write("ready\\n");\n${code}`], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`the node process exited with ${code} before it was ready`)));
  });
  return child;
}
/** What the watched processes did over one second. */
async function overOneSecond(watched: WatchedProcess[]) {
  const before = snapshot(watched);
  await sleep(1_000);
  return usage(before, snapshot(watched))!;
}

describe.runIf(linux)("bench thread meter (scripts/bench/threads.mjs)", () => {
  it("tells a thread that spins from one that sleeps", async () => {
    const spinner = await node("ready(); for (;;) {}");
    const sleeper = await node("ready(); setTimeout(() => {}, 600_000)");
    try {
      const shares = await overOneSecond([
        { role: "service", pid: spinner.pid!, allThreads: false },
        { role: "proxy", pid: sleeper.pid!, allThreads: false },
      ]);
      // A spinning thread is always on a CPU or waiting for one, however loaded the machine is.
      expect(shares.service!.busy + shares.service!.waiting).toBeGreaterThan(0.8);
      expect(shares.proxy!.busy).toBeLessThan(0.1);
      expect(describeUsage(shares)).toMatch(
        /^the service's thread \d+ % busy \(\+\d+ % waiting for a core\), the dev proxy's \d+ %$/,
      );
    } finally {
      spinner.kill("SIGKILL");
      sleeper.kill("SIGKILL");
    }
  });

  it("counts every thread of a pool (anvil's), or the main thread alone (workerd's)", async () => {
    // The main thread sleeps; a worker thread spins (it says so before it starts).
    const pool = await node(
      "new (require('node:worker_threads').Worker)(\"require('node:worker_threads').parentPort.postMessage(1); for (;;) {}\", { eval: true }).once('message', ready); setTimeout(() => {}, 600_000)",
    );
    try {
      const shares = await overOneSecond([
        { role: "anvil", pid: pool.pid!, allThreads: true },
        { role: "service", pid: pool.pid!, allThreads: false },
      ]);
      expect(shares.anvil!.busy + shares.anvil!.waiting).toBeGreaterThan(0.8);
      expect(shares.service!.busy).toBeLessThan(0.1);
    } finally {
      pool.kill("SIGKILL");
    }
  });

  it("leaves out a process that ended inside the window, and says nothing when nothing is left", async () => {
    const brief = await node("ready(); setTimeout(() => {}, 600_000)");
    const watched: WatchedProcess[] = [{ role: "service", pid: brief.pid!, allThreads: false }];
    const before = snapshot(watched);
    expect(before.readings[0]!.threads![String(brief.pid)]!.cpuNs).toBeGreaterThanOrEqual(0);
    brief.kill("SIGKILL");
    await new Promise((r) => brief.once("exit", r));
    await sleep(100);
    const after = snapshot(watched);
    expect(after.readings[0]!.threads).toBeNull();
    expect(usage(before, after)).toBeNull();
    expect(describeUsage(null)).toBeNull();
  });

  it("reads when each thread started, and does not count a thread id that names a newer thread at the end", async () => {
    const sleeper = await node("ready(); setTimeout(() => {}, 600_000)");
    try {
      const real = snapshot([{ role: "anvil", pid: sleeper.pid!, allThreads: true }]);
      expect(real.readings[0]!.threads![String(sleeper.pid)]!.startTicks).toMatch(/^\d+$/);
    } finally {
      sleeper.kill("SIGKILL");
    }
    // Thread ids are reused once they wrap around: the same id with another start is another thread,
    // whose smaller counters would otherwise read as negative time.
    const at = (seconds: number, cpuNs: number, startTicks: string) => ({
      atNs: BigInt(seconds * 1e9),
      readings: [
        { role: "anvil" as const, pid: 1, allThreads: true, threads: { "7": { cpuNs, waitNs: 0, startTicks } } },
      ],
    });
    expect(usage(at(10, 5e9, "100"), at(11, 5.5e9, "100"))!.anvil!.busy).toBeCloseTo(0.5);
    expect(usage(at(10, 5e9, "100"), at(11, 1e6, "900"))!.anvil).toEqual({ busy: 0, waiting: 0 });
  });

  describe("on `npm run dev`", () => {
    let dev: DevServer;
    beforeAll(async () => {
      // As the bench runs it (scripts/bench/server.mjs): anvil in npm run dev's process group.
      dev = await startDevServer({ DEV_CHAIN_PERSIST: "false" });
    });
    afterAll(async () => {
      await dev?.stop();
    });

    it("finds the entry proxy, the service's workerd and anvil, and measures the service's thread under requests", async () => {
      const found = serviceProcesses(dev.pgid, dev.port);
      expect(found.map((p) => p.role).sort()).toEqual(["anvil", "proxy", "service"]);
      expect(found.find((p) => p.role === "anvil")!.allThreads).toBe(true);

      const before = snapshot(found);
      for (let i = 0; i < 100; i++) expect((await fetch(`${dev.url}/no-such-route`)).status).toBe(404);
      const shares = usage(before, snapshot(found))!;
      // Every request ran on the service's thread and passed through the proxy.
      expect(shares.service!.busy).toBeGreaterThan(0);
      expect(shares.proxy!.busy).toBeGreaterThan(0);
      expect(describeUsage(shares)).toMatch(/the service's thread .*, the dev proxy's .*, anvil \d+ %/);
    });
  });
});
