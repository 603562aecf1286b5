import { env } from "cloudflare:workers";
import { toHex } from "viem";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { type Env, settingsOf } from "../../src/config/env";
import { type JobMessage, runJob } from "../../src/jobs/minute";
import { CRON_JOBS } from "../../src/jobs/table";
import { placementOf } from "../../src/ledger/place";
import { shardLabel } from "../../src/ledger/shard-labels";
import { currentInvocation, Invocation, runInvocation } from "../../src/lib/invocation";
import { STEP_COST } from "../../src/outbound/run";
import { publicClient } from "../helpers/x402";

/*
 * What one invocation of each cron job costs, counted as Cloudflare counts it: every D1 statement
 * (the job's env counts them), every Durable Object call, queue send and R2 call, and every fetch
 * (the chain's RPC requests count themselves; a fetch made outside the chain client's slots, viem's
 * own transport, is caught here and added). Seeded with bulk SQL: 10,000 agents with deposit
 * addresses, a backlog of 500 payouts and 500 sweeps, and 100,000 audit rows. Each run stays under
 * Cloudflare's per-invocation limits (Workers Paid: 1,000 D1 queries, 1,000 subrequests), and with
 * nothing waiting, a run costs the same with 100 agents as with 10,000.
 */

const CLOUDFLARE_LIMITS = { d1Queries: 1000, subrequests: 1000 };
const e = env as Env;

interface Cost {
  d1Queries: number;
  subrequests: number;
}

/** The messages the minute's trigger sends (a job per place for those that walk every place). */
function minute(): JobMessage[] {
  const places = placementOf(e).each();
  return Object.entries(CRON_JOBS).flatMap(([job, spec]) =>
    spec.each === "place" ? places.map((at) => ({ job, place: shardLabel(at) })) : [{ job }],
  );
}

const nameOf = (m: JobMessage) => (m.place === undefined ? m.job : `${m.job}@${m.place}`);

/** One job's run in an invocation of its own, as the jobs queue's consumer runs it, and what it spent. */
async function runCounted(message: JobMessage, limits?: Cost): Promise<Cost> {
  const invocation = new Invocation(limits && { ...limits, rpcInFlight: 4 });
  const slotted = vi.spyOn(invocation, "withSlot");
  const realFetch = globalThis.fetch;
  let fetches = 0;
  const fetchSpy = vi.spyOn(globalThis, "fetch").mockImplementation((...args: Parameters<typeof fetch>) => {
    if (currentInvocation() === invocation) fetches++;
    return realFetch(...args);
  });
  const errors = vi.spyOn(console, "error");
  try {
    await runInvocation(invocation, () => runJob(message, e));
  } finally {
    fetchSpy.mockRestore();
  }
  const failed = errors.mock.calls
    .flat()
    .map(String)
    .filter((line) => line.includes('"where":"cron"'));
  errors.mockRestore();
  // A job that threw would have stopped early: its count would say nothing.
  expect(failed, nameOf(message)).toEqual([]);
  // A fetch made in a slot is counted by the slot already.
  return {
    d1Queries: invocation.spent.d1Queries,
    subrequests: invocation.spent.subrequests + Math.max(0, fetches - slotted.mock.calls.length),
  };
}

/**
 * The chain moves on between minutes, as in production: jobs that follow it have a window to read.
 * One block: the chain is shared with other files, whose confirmation counts a long mine would upset.
 */
const chainMinute = () => publicClient().request({ method: "anvil_mine" as never, params: [toHex(1)] as never });

async function runMinute(): Promise<Map<string, Cost>> {
  await chainMinute();
  const costs = new Map<string, Cost>();
  for (const message of minute()) costs.set(nameOf(message), await runCounted(message));
  return costs;
}

const table = (costs: Map<string, Cost>) =>
  Object.fromEntries([...costs].map(([job, c]) => [job, `${c.d1Queries} D1, ${c.subrequests} subrequests`]));

/** `n` agents with deposit addresses, numbered from `from`, written in one statement. */
async function seedAgents(from: number, n: number) {
  await e.DB.prepare(
    `WITH RECURSIVE k(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1 + ?2 - 1)
     INSERT INTO agents (id, name, api_key_hash, balance_minor, policy, created_at, deposit_index, deposit_address)
     SELECT printf('agt_scale%08d', i), 'idle ' || i, printf('%064x', i), 0, '{}', '2026-01-01T00:00:00.000Z',
            100000 + i, printf('0x%040x', 1000000 + i) FROM k`,
  )
    .bind(from, n)
    .run();
}

/**
 * Pending transfers of `purpose`, untouched for an hour: due for the cron. Payouts were handed over
 * (a request that stopped after sending: the chain is asked, then the same authorization goes
 * again, the longest path); sweeps never were (they fail on the empty addresses they name).
 */
async function seedTransfers(purpose: "payout" | "sweep", n: number) {
  const x = settingsOf(e).x402!;
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  const validBefore = Math.floor(Date.now() / 1000) + 3600;
  // A payout from the settlement address to itself: sent for real, it moves nothing anyone else counts.
  const [from, signer] =
    purpose === "payout"
      ? [x.payTo.toLowerCase(), "'settlement'"]
      : ["printf('0x%040x', 2000000 + i)", "'deposit:' || (900000 + i)"];
  const salt = crypto.randomUUID().replaceAll("-", "").slice(0, 16);
  await e.DB.prepare(
    `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
     INSERT INTO outbound_transfers (id, purpose, owner_id, network, asset, from_address, signer, to_address, value,
       nonce, valid_before, status, broadcast_at, created_at, updated_at)
     SELECT printf('otx_%s%08d', ?, i), ?, printf('own_%s%08d', ?, i), ?, ?, ${purpose === "payout" ? "?" : from}, ${signer},
            ?, '1', printf('0x%s%048x', ?, i), ?, 'pending', ?, ?, ? FROM k`,
  )
    .bind(
      n,
      salt,
      purpose,
      salt,
      x.network,
      x.asset.toLowerCase(),
      ...(purpose === "payout" ? [from] : []),
      x.payTo.toLowerCase(),
      salt,
      validBefore,
      purpose === "payout" ? hourAgo : null,
      hourAgo,
      hourAgo,
    )
    .run();
}

/** `n` audit rows (a long history not yet checkpointed), their hashes standing in for a chain. */
async function seedAuditHistory(n: number) {
  await e.DB.prepare(
    `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
     INSERT INTO audit_events (seq, type, amount_minor, currency, data, created_at, prev_hash, hash)
     SELECT i, 'agent.credited', 1, 'USD', '{}', ?, printf('%064x', i - 1), printf('%064x', i) FROM k`,
  )
    .bind(n, new Date().toISOString())
    .run();
}

/** The seeded transfers of `purpose` no run has stepped yet: still pending, never handed over or marked. */
const untouched = async (purpose: string) =>
  Number(
    await e.DB.prepare(
      "SELECT COUNT(*) AS n FROM outbound_transfers WHERE purpose = ? AND status = 'pending' AND updated_at = created_at",
    )
      .bind(purpose)
      .first("n"),
  );

const withinLimits = (costs: Map<string, Cost>) => {
  for (const [job, c] of costs) {
    expect(c.d1Queries, `${job}: D1 queries`).toBeLessThanOrEqual(CLOUDFLARE_LIMITS.d1Queries);
    expect(c.subrequests, `${job}: subrequests`).toBeLessThanOrEqual(CLOUDFLARE_LIMITS.subrequests);
  }
};

/**
 * Jobs whose idle cost still follows the agents, and why: each asserted below to grow no faster
 * than that, and in D1 not at all. The deposit watcher's rewrite (the token's Transfer logs read
 * once per window and matched to deposit addresses) removes its line.
 */
/**
 * Jobs whose idle cost follows the chain, not the agents: the deposit watcher reads the blocks mined
 * since its last run (other files share this chain and mine meanwhile), at most this much a window
 * (its eth_getLogs; the recipients' lookup and the cursor), and at most MAX_WINDOWS a run. Growth
 * with agents would be some 99 more calls at 10,000 agents than at 100.
 */
const FOLLOWS_THE_CHAIN: Record<string, { perWindow: Cost; why: string }> = {
  deposit_watch: {
    perWindow: { d1Queries: 2, subrequests: 1 },
    why: "the token's transfers since its last run, window by window, whatever the number of agents",
  },
};
const MAX_WINDOWS = 10;

describe("one invocation of each cron job", () => {
  let idle100: Map<string, Cost>;
  let idle10k: Map<string, Cost>;

  beforeAll(async () => {
    await seedAgents(1, 100);
    // The first minute settles what any first run does (a deposit cursor, say); then nothing waits.
    await runMinute();
    idle100 = await runMinute();
    await seedAgents(101, 9_900);
    idle10k = await runMinute();
  }, 300_000);

  it("costs the same with 100 idle agents as with 10,000", () => {
    console.log(JSON.stringify({ where: "cron_costs_idle", agents100: table(idle100), agents10k: table(idle10k) }));
    expect([...idle10k.keys()]).toEqual([...idle100.keys()]);
    for (const [job, at100] of idle100) {
      const at10k = idle10k.get(job)!;
      const chain = FOLLOWS_THE_CHAIN[job.split("@")[0]!];
      if (!chain) {
        expect(at10k, job).toEqual(at100);
        continue;
      }
      for (const kind of ["d1Queries", "subrequests"] as const)
        expect(Math.abs(at10k[kind] - at100[kind]), `${job} ${kind}: ${chain.why}`).toBeLessThanOrEqual(
          chain.perWindow[kind] * MAX_WINDOWS,
        );
    }
    withinLimits(idle10k);
  });

  it("stays under the limits with 10,000 agents, 500 payouts and 500 sweeps waiting, and a long audit history", async () => {
    await seedTransfers("payout", 500);
    await seedTransfers("sweep", 500);
    await seedAuditHistory(100_000);
    const busy = await runMinute();
    console.log(JSON.stringify({ where: "cron_costs_busy", costs: table(busy) }));
    withinLimits(busy);
    // Each backlog moved, and what is left is found again by the next run, which moves it on.
    const [payouts, sweeps] = [await untouched("payout"), await untouched("sweep")];
    expect(payouts).toBeLessThan(500);
    expect(sweeps).toBeLessThan(500);
    withinLimits(
      new Map([
        ["payouts again", await runCounted({ job: "payouts", place: 0 })],
        ["treasury_sweeps again", await runCounted({ job: "treasury_sweeps", place: 0 })],
      ]),
    );
    expect(await untouched("payout")).toBeLessThan(payouts);
    expect(await untouched("sweep")).toBeLessThan(sweeps);
  }, 300_000);

  it("stops a job at its count, before the limit, and its next run goes on from there", async () => {
    const warn = vi.spyOn(console, "warn");
    try {
      // Room for one payout's worst case: the run takes one, says it stopped, and leaves the rest due.
      const tight = { d1Queries: 900, subrequests: STEP_COST.subrequests };
      const before = await untouched("payout");
      const spent = await runCounted({ job: "payouts", place: 0 }, tight);
      expect(spent.subrequests).toBeLessThanOrEqual(tight.subrequests);
      expect(before - (await untouched("payout"))).toBe(1);
      expect(warn.mock.calls.flat().map(String).join("\n")).toMatch(
        /"where":"invocation_bound","what":"outbound_payout"/,
      );
      await runCounted({ job: "payouts", place: 0 });
      expect(await untouched("payout")).toBeLessThan(before - 1);
    } finally {
      warn.mockRestore();
    }
  }, 120_000);
});
