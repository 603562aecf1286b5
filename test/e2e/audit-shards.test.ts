import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuditRow, chainHash, genesisHashOf } from "../../src/ledger/chain";
import { BEHIND_A_PROVIDER, type DevServer, expectNothingRefused, startDevServer } from "./dev-server";
import { shardOwners } from "./shard-owners";

// `audit verify` of the CLI against `npm run dev` with two ledger shards: every shard walked, each
// against its own checkpoints and the anchors read from the local chain, each named in the report.
// Then shard 1's database is tampered with behind the service's back (wrangler on DB_SHARD_1, as an
// operator with database access could): rows cut from its end, then what is left rewritten with
// fresh hashes. Both fail naming shard 1 and the checkpoint contradicted; shard 0 stays ok.

interface Checkpoint {
  seq: number;
  transaction: string | null;
}

describe("audit verify over two ledger shards", () => {
  let dev: DevServer;
  let token: string;
  beforeAll(async () => {
    dev = await startDevServer(
      { ...BEHIND_A_PROVIDER.vars, DEV_LEDGER_SHARDS: "2", DEV_LEDGER_SHARD_PLACEMENT: "spread" },
      BEHIND_A_PROVIDER.options,
    );
    token = dev.cli("console-token", "--email", "ops@example.com").stdout.trim();
  });
  afterAll(async () => {
    await dev?.stop();
  });

  it("checks each shard against its own checkpoints and anchors, and names shard 1 when its rows are cut or rewritten", async () => {
    const { call, charge, merchantsOfEachShard, agentsOfEachShard } = shardOwners(dev, token);
    const pay = async (agent: { apiKey: string }, merchantKey: string, cents: number) => {
      const paid = await call("POST", `/charges/${await charge(merchantKey, cents)}/pay`, agent.apiKey);
      expect(paid.status, paid.text).toBe(200);
    };
    /** A checkpoint of the shard's head now, once it and every one before it are anchored on chain. */
    const anchoredHead = async (shard: number): Promise<Checkpoint> => {
      const made = await call("POST", `/console/audit/checkpoints?shard=${shard}`, token);
      expect([200, 201]).toContain(made.status);
      let listed = await checkpointsOf(shard);
      // Anchored within the request, or by the cron (every 2 s here) soon after.
      for (let i = 0; i < 100 && listed.some((cp) => !cp.transaction); i++) {
        await new Promise((r) => setTimeout(r, 200));
        listed = await checkpointsOf(shard);
      }
      expect(listed.filter((cp) => !cp.transaction)).toEqual([]);
      expect(listed.at(-1)!.seq).toBe(made.body.checkpoint.seq);
      return listed.at(-1)!;
    };
    const checkpointsOf = async (shard: number): Promise<Checkpoint[]> => {
      const res = await call("GET", `/console/audit/checkpoints?shard=${shard}&limit=1000`, token);
      expect(res.status).toBe(200);
      return res.body.checkpoints;
    };
    const consoleVerdict = async () => {
      const res = await call("GET", "/console/audit/verify?full=true", token);
      expect(res.status).toBe(200);
      return res.body as {
        ok: boolean;
        shards: { shard: number; ok: boolean; brokenSeq?: number; problem?: string }[];
      };
    };

    expect((await call("GET", "/console/audit/shards", token)).body).toEqual({ shards: [0, 1] });
    // Payments landing on both shards, and a checkpoint of each anchored; then more on shard 1, anchored again.
    const [m0, m1] = await merchantsOfEachShard();
    const [a0, a1] = await agentsOfEachShard(m0);
    await pay(a0, m0, 300);
    await pay(a1, m1, 250);
    await pay(a0, m1, 120);
    const head0 = await anchoredHead(0);
    const before1 = await anchoredHead(1);
    await pay(a1, m1, 75);
    await pay(a1, m1, 60);
    const head1 = await anchoredHead(1);
    expect(head1.seq).toBeGreaterThan(before1.seq);

    const verified = dev.cli("audit", "verify");
    expect(verified.status, verified.stdout + verified.stderr).toBe(0);
    expect(verified.stdout).toContain("shard 0: audit chain ok: ");
    expect(verified.stdout).toContain(`shard 0: checkpoints ok: `);
    expect(verified.stdout).toContain(`latest anchored: seq ${head0.seq} (tx ${head0.transaction})`);
    expect(verified.stdout).toContain(`shard 1: audit chain ok: ${head1.seq} rows`);
    expect(verified.stdout).toMatch(
      new RegExp(`shard 1: checkpoints ok: .*; latest anchored: seq ${head1.seq} \\(tx ${head1.transaction}\\)`),
    );
    expect(verified.stdout.trim().split("\n").at(-1)).toBe("audit verify ok: shards 0, 1");
    // The anchors read in windows of 3 blocks from the verifier's own start block: the same verdict.
    const windowed = dev.cli("audit", "verify", "--max-log-range", "3", "--from-block", "0");
    expect(windowed.status, windowed.stdout + windowed.stderr).toBe(0);
    expect(windowed.stderr).toContain("since block 0, 3 blocks a request");
    expect(windowed.stdout).toContain(`latest anchored: seq ${head0.seq} (tx ${head0.transaction})`);
    expect(windowed.stdout.trim().split("\n").at(-1)).toBe("audit verify ok: shards 0, 1");
    expect(dev.cli("audit", "verify", "--max-log-range", "0").status).toBe(2);

    // Shard 1's rows cut back to before its latest checkpoint (and the console's remembered point dropped).
    const cut = dev.d1(
      `DELETE FROM audit_events WHERE seq >= ${head1.seq - 1}; DELETE FROM audit_verifications;`,
      "DB_SHARD_1",
    );
    expect(cut.status, cut.stderr + cut.stdout).toBe(0);
    const truncated = dev.cli("audit", "verify");
    expect(truncated.status).toBe(1);
    // The chain alone sees nothing: it is shorter, not broken.
    expect(truncated.stdout).toContain(`shard 1: audit chain ok: ${head1.seq - 2} rows`);
    expect(truncated.stdout).toContain("shard 1: checkpoints FAILED");
    expect(truncated.stdout).toContain(
      `  shard 1: checkpoint seq ${head1.seq} (tx ${head1.transaction}): anchor_contradicts_rows: the rows end at seq ${head1.seq - 2}: rows removed from the end`,
    );
    expect(truncated.stdout).toContain("shard 0: checkpoints ok: ");
    expect(truncated.stdout.trim().split("\n").at(-1)).toBe("audit verify FAILED: shard 1");
    // The console sees it too, from the checkpoints stored with the rows: the first beyond the last row.
    const beyond = (await checkpointsOf(1)).find((cp) => cp.seq > head1.seq - 2)!;
    const afterCut = await consoleVerdict();
    expect(afterCut.ok).toBe(false);
    expect(afterCut.shards).toEqual([
      expect.objectContaining({ shard: 0, ok: true }),
      expect.objectContaining({ shard: 1, ok: false, brokenSeq: beyond.seq, problem: "checkpoint_contradicts_rows" }),
    ]);

    // What is left of shard 1 rewritten with fresh hashes from its own genesis: row 1's amount changed.
    const rows = (await call("GET", "/console/audit?shard=1&limit=1000", token)).body.events as AuditRow[];
    expect(rows.length).toBe(head1.seq - 2);
    let prevHash = genesisHashOf(1);
    const updates = rows.map((row) => {
      const draft = { ...row, amountMinor: row.seq === 1 ? row.amountMinor! + 100 : row.amountMinor };
      const hash = chainHash(prevHash, row.seq, draft);
      const sql = `UPDATE audit_events SET amount_minor = ${draft.amountMinor}, prev_hash = '${prevHash}', hash = '${hash}' WHERE seq = ${row.seq};`;
      prevHash = hash;
      return sql;
    });
    const rewrite = dev.d1(`${updates.join(" ")} DELETE FROM audit_verifications;`, "DB_SHARD_1");
    expect(rewrite.status, rewrite.stderr + rewrite.stdout).toBe(0);
    const first1 = (await checkpointsOf(1))[0]!;
    const rewritten = dev.cli("audit", "verify");
    expect(rewritten.status).toBe(1);
    expect(rewritten.stdout).toContain(`shard 1: audit chain ok: ${head1.seq - 2} rows`);
    expect(rewritten.stdout).toContain(
      `  shard 1: checkpoint seq ${first1.seq} (tx ${first1.transaction}): anchor_contradicts_rows: row ${first1.seq} has hash `,
    );
    expect(rewritten.stdout).toContain("the chain was rewritten");
    expect(rewritten.stdout).toContain("shard 0: checkpoints ok: ");
    expect(rewritten.stdout.trim().split("\n").at(-1)).toBe("audit verify FAILED: shard 1");
    const afterRewrite = await consoleVerdict();
    expect(afterRewrite.shards[1]).toMatchObject({
      ok: false,
      brokenSeq: first1.seq,
      problem: "checkpoint_contradicts_rows",
    });
  });

  it("went through a provider's proxy that refused nothing", async () => {
    await expectNothingRefused(dev);
  });
});
