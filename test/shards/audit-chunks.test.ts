import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { AUDIT_VERIFY_CHUNK } from "../../src/audit/verification";
import { auditVerifyJob } from "../../src/audit/verify-job";
import { genesisHashOf } from "../../src/ledger/chain";
import { Invocation, runInvocation } from "../../src/lib/invocation";
import { api, consoleToken } from "../helpers/api";
import { appendAuditRows } from "../helpers/audit-rows";

/*
 * With two ledger shards a request still re-hashes one chunk at most in all: half of it for each
 * shard's chain. Shard 1's long history is verified over several requests, each continuing from
 * the point shard 1 remembered, while shard 0's short one holds at once; the top level is the
 * shard still in progress, and a row changed in shard 1 is named there.
 */

/** Shard 1's database: this project runs two shards. */
const shard1 = () => {
  if (!env.DB_SHARD_1) throw new Error("this test runs with two ledger shards");
  return env.DB_SHARD_1;
};
const HALF = Math.floor(AUDIT_VERIFY_CHUNK / 2);
const SHORT = 1_000;
const LONG = 2 * HALF + 500;

interface ShardVerdict {
  shard: number;
  ok: boolean;
  checked: number;
  rows: number;
  brokenSeq?: number;
  progress?: { throughSeq: number; lastSeq: number };
}

async function verify() {
  const res = await api("GET", "/console/audit/verify", { token: await consoleToken() });
  expect(res.status).toBe(200);
  const body = res.body as ShardVerdict & { shards: ShardVerdict[] };
  // Never more than one chunk re-hashed by a request, whatever the shards.
  expect(body.shards.reduce((sum, s) => sum + s.checked, 0)).toBeLessThanOrEqual(AUDIT_VERIFY_CHUNK);
  return body;
}

beforeAll(async () => {
  await appendAuditRows(env.DB, genesisHashOf(0), SHORT);
  await appendAuditRows(shard1(), genesisHashOf(1), LONG);
});

describe("audit verification in bounded steps, two shards", () => {
  it("splits a request's chunk between the shards and carries each on from its own point", async () => {
    const first = await verify();
    expect(first.shards).toEqual([
      expect.objectContaining({ shard: 0, ok: true, checked: SHORT, rows: SHORT }),
      expect.objectContaining({ shard: 1, ok: true, checked: HALF, progress: { throughSeq: HALF, lastSeq: LONG } }),
    ]);
    expect(first.shards[0]).not.toHaveProperty("progress");
    // The top level is the shard still in progress: it never says the whole holds while one has rows left.
    expect(first).toMatchObject({ ok: true, progress: { throughSeq: HALF, lastSeq: LONG } });

    const second = await verify();
    expect(second.shards).toEqual([
      expect.objectContaining({ shard: 0, checked: 0 }),
      expect.objectContaining({ shard: 1, checked: HALF, progress: { throughSeq: 2 * HALF, lastSeq: LONG } }),
    ]);

    // A row changed in the part not verified yet: the step that reaches it names it, on shard 1.
    const changed = 2 * HALF + 100;
    const change = (by: number) =>
      shard1().prepare("UPDATE audit_events SET amount_minor = amount_minor + ? WHERE seq = ?").bind(by, changed).run();
    await change(1);
    try {
      const broken = await verify();
      expect(broken).toMatchObject({ ok: false, brokenSeq: changed, problem: "hash_mismatch" });
      expect(broken.shards[1]).toMatchObject({ shard: 1, ok: false, brokenSeq: changed });
    } finally {
      await change(-1);
    }
    const last = await verify();
    expect(last).toMatchObject({ ok: true, rows: SHORT });
    expect(last.shards[1]).toMatchObject({ ok: true, checked: LONG - 2 * HALF, rows: LONG });
    expect(last).not.toHaveProperty("progress");
    expect(last.shards[1]).not.toHaveProperty("progress");
  });

  it("the cron job carries every shard to its head", async () => {
    const head = await appendAuditRows(shard1(), genesisHashOf(1), 2 * AUDIT_VERIFY_CHUNK + 10);
    await runInvocation(new Invocation(), () => auditVerifyJob(env));
    const after = await verify();
    expect(after.shards).toEqual([
      expect.objectContaining({ shard: 0, ok: true, checked: 0 }),
      expect.objectContaining({ shard: 1, ok: true, checked: 0, rows: head.seq }),
    ]);
  });
});
