import { createMessageBatch } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { type Env, settingsOf } from "../../src/config/env";
import worker from "../../src/index";
import { type JobMessage, runJob } from "../../src/jobs/minute";
import { CRON_JOBS } from "../../src/jobs/table";
import { countedEnv } from "../../src/lib/counted-env";
import { Invocation, runInvocation } from "../../src/lib/invocation";
import { cronTick } from "../helpers/cron";

const e = env as Env;

/** Runs `work` in an invocation of its own (limits as given) and answers what it spent. */
async function spentBy(work: () => Promise<unknown>, limits?: { d1Queries: number; subrequests: number }) {
  const invocation = new Invocation(limits && { ...limits, rpcInFlight: 4 });
  await runInvocation(invocation, work);
  return { ...invocation.spent };
}

describe("a job's counted bindings", () => {
  it("count each D1 statement run (first, all, run, raw, each of a batch), and each stub call, queue send and R2 call", async () => {
    const counted = countedEnv(e);
    const d1 = await spentBy(async () => {
      const one = counted.DB.prepare("SELECT ? AS n");
      await one.bind(1).first();
      await one.bind(2).all();
      await counted.DB.prepare("SELECT 1").run();
      await counted.DB.prepare("SELECT 1").raw();
      await counted.DB.batch([counted.DB.prepare("SELECT 1"), counted.DB.prepare("SELECT ? AS n").bind(2)]);
    });
    expect(d1).toEqual({ d1Queries: 6, subrequests: 0 });
    const calls = await spentBy(async () => {
      await counted.ARCHIVE.head(`nothing-${crypto.randomUUID()}`);
      await counted.WEBHOOK_DLQ.send({ deliveryId: "whd_none", final: true });
      // A stub made and an id named cost nothing until the object is called.
      const stub = counted.WALLET.get(counted.WALLET.idFromName(`counted-${crypto.randomUUID()}`));
      await stub.resumeTransfers({ from: 0, ids: [] });
    });
    expect(calls).toEqual({ d1Queries: 0, subrequests: 3 });
    // The env's plain settings pass through as they are.
    expect(settingsOf(counted).ledgerShards).toBe(settingsOf(e).ledgerShards);
  });
});

describe("the jobs queue", () => {
  it("gets a message per job (per place for those that walk every place) from the minute's trigger", async () => {
    const sent = await cronTick(e);
    const expected = Object.entries(CRON_JOBS).map(([job, spec]) =>
      spec.each === "place" ? { job, place: 0 } : { job },
    );
    expect(sent).toEqual(expected);
  });

  it("acknowledges a job that failed and logs it naming the job, and each message runs in an invocation of its own", async () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const unreachableChain = { ...e, RPC_URL: "http://127.0.0.1:9/" } as Env;
      const batch = createMessageBatch<JobMessage>("agent-pay-jobs", [
        { id: "m1", timestamp: new Date(), attempts: 1, body: { job: "deposit_watch" } },
        { id: "m2", timestamp: new Date(), attempts: 1, body: { job: "no_such_job" } },
      ]);
      const acked = batch.messages.map((m) => vi.spyOn(m, "ack"));
      const retried = batch.messages.map((m) => vi.spyOn(m, "retry"));
      await worker.queue!(batch as MessageBatch, unreachableChain);
      for (const ack of acked) expect(ack).toHaveBeenCalledOnce();
      for (const retry of retried) expect(retry).not.toHaveBeenCalled();
      const logged = error.mock.calls
        .flat()
        .map(String)
        .filter((line) => line.includes('"where":"cron"'))
        .map((line) => JSON.parse(line) as { job: string; level: string });
      expect(logged).toEqual([
        expect.objectContaining({ level: "error", job: "deposit_watch" }),
        expect.objectContaining({ level: "error", job: "no_such_job" }),
      ]);
    } finally {
      error.mockRestore();
    }
  });

  it("runs a job stopped by its count on its next run from where it stopped, and says it stopped", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      // Expired rate-limit counters, and room for none of the deletes: the job asks, stops, and says so.
      const control = e.DB;
      const tag = crypto.randomUUID().slice(0, 8);
      await control
        .prepare("INSERT INTO rate_limits (key, window_start, count) VALUES (?, 0, 1), (?, 0, 1)")
        .bind(`bound-${tag}-a`, `bound-${tag}-b`)
        .run();
      const stale = () =>
        control.prepare("SELECT COUNT(*) AS n FROM rate_limits WHERE key LIKE ?").bind(`bound-${tag}-%`).first("n");
      // No room at all: nothing deleted, and the stop is in the log.
      const tight = await spentBy(() => runJob({ job: "retention", place: 0 }, e), { d1Queries: 0, subrequests: 0 });
      expect(tight).toEqual({ d1Queries: 0, subrequests: 0 });
      expect(await stale()).toBe(2);
      expect(warn.mock.calls.flat().map(String).join("\n")).toContain('"where":"invocation_bound"');
      // The next run, with room, deletes them.
      const roomy = await spentBy(() => runJob({ job: "retention", place: 0 }, e));
      expect(roomy.d1Queries).toBeGreaterThan(0);
      expect(await stale()).toBe(0);
    } finally {
      warn.mockRestore();
    }
  });
});
