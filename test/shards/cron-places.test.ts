import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Env } from "../../src/config/env";
import { runJob } from "../../src/jobs/minute";
import { CRON_JOBS } from "../../src/jobs/table";
import { envOfOnePlace, placementOf } from "../../src/ledger/place";
import { newId } from "../../src/lib/ids";
import { Invocation, runInvocation } from "../../src/lib/invocation";
import { cronTick } from "../helpers/cron";

// With two ledger shards, a job that walks the shards runs once per shard, each run walking its own.

const e = env as Env;

describe("the cron's jobs over two shards", () => {
  it("get a message per job and shard, and one for the deployment's jobs", async () => {
    const sent = await cronTick(e);
    for (const [job, spec] of Object.entries(CRON_JOBS)) {
      const mine = sent.filter((m) => m.job === job);
      expect(mine, job).toEqual(
        spec.each === "place"
          ? [
              { job, place: 0 },
              { job, place: 1 },
            ]
          : [{ job }],
      );
    }
  });

  it("walk their shard alone, and still find any id's place and control", () => {
    const all = placementOf(e);
    const one = envOfOnePlace(e, 1)!;
    expect(
      placementOf(one)
        .each()
        .map((at) => at.shard),
    ).toEqual([1]);
    expect(placementOf(one).control.isControl).toBe(true);
    const idOnZero = newId("payout", all.control);
    expect(placementOf(one).ofId(idOnZero)?.shard).toBe(0);
    expect(envOfOnePlace(e, 7)).toBeNull();
  });

  it("cost the same in each shard's run when nothing waits, whatever the number of shards", async () => {
    const costs = [];
    for (const place of [0, 1]) {
      const invocation = new Invocation();
      await runInvocation(invocation, () => runJob({ job: "payouts", place }, e));
      costs.push(invocation.spent);
    }
    // One due read in its own shard's database, never one per shard.
    expect(costs[0]).toEqual({ d1Queries: 1, subrequests: 0 });
    expect(costs[1]).toEqual(costs[0]);
  });
});
