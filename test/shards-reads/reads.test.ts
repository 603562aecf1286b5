import { env } from "cloudflare:workers";
import { decodeProtectedHeader } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { archiveHistory } from "../../src/archive/archive";
import { anchorSeqOf } from "../../src/audit/anchor-abi";
import { checkpointPage } from "../../src/audit/checkpoint-rows";
import { CHECKPOINT_TYP, type ListedCheckpoint, verifyCheckpoints } from "../../src/audit/checkpoints-verify";
import { csvExportResponse } from "../../src/audit/csv";
import { auditRows } from "../../src/audit/service";
import { verifyEveryShard } from "../../src/audit/verification";
import { auditCheckpointJob } from "../../src/checkpoints/anchoring";
import { makeCheckpoint } from "../../src/checkpoints/checkpoints";
import type { Env, X402Settings } from "../../src/config/env";
import { settingsOf } from "../../src/config/settings";
import { readOverview, readOverviewOfShards, readPayoutTotals } from "../../src/console/ui/queries";
import { dbOfShard } from "../../src/db/shards";
import { genesisHashOf } from "../../src/ledger/chain";
import { ensureHomeRow } from "../../src/ledger/home-rows";
import { ledgerOf } from "../../src/ledger/ledger.do";
import { agentCreditPlan } from "../../src/ledger/movements";
import { placementOf } from "../../src/ledger/place";
import { setFaultHook } from "../../src/lib/faults";
import { CONTROL_IDS, newId } from "../../src/lib/ids";
import { readLedgerSnapshot } from "../../src/treasury/ledger-side";
import { dispatchOutbox, forwardShardOutbox } from "../../src/webhooks/dispatch";
import { api } from "../helpers/api";
import { createAgent, createMerchant } from "../helpers/factories";
import { registerEndpoint } from "../helpers/webhooks";

/*
 * What reads and periodic jobs do over more than one ledger shard, run in the one-shard project:
 * `env2` is the same bindings with LEDGER_SHARDS=2 (settings are cached per env object), and shard 1's
 * rows are written by committing plans through its own sequencer, as test/ledger/shards.test.ts does.
 */
const env2 = { ...env, LEDGER_SHARDS: "2" } as Env;
const shard1 = dbOfShard(env, 1);
/** Shard 1's place in `env2`. */
const place1 = placementOf(env2).each()[1]!;

afterEach(() => setFaultHook(null));

/** Credits an agent living in shard 1 (an account row there) through shard 1's sequencer. */
async function creditInShard1(amountMinor: number) {
  const agent = await createAgent();
  await ensureHomeRow(env, "agent", agent.agentId, 1);
  const result = await ledgerOf(env2, 1).commit(
    agentCreditPlan({
      agentId: agent.agentId,
      amountMinor,
      transferId: `reads_${crypto.randomUUID()}`,
      reference: `reads-${crypto.randomUUID()}`,
      by: "test",
      createdAt: new Date().toISOString(),
    }),
  );
  expect(result.kind).toBe("committed");
  return agent;
}

const payloadOf = (jws: string) =>
  JSON.parse(
    new TextDecoder().decode(
      Uint8Array.from(atob(jws.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/")), (ch) => ch.charCodeAt(0)),
    ),
  );

const listed = async (db: D1Database): Promise<ListedCheckpoint[]> =>
  (await checkpointPage(db, 0, 1000)).map((cp) => ({ ...cp, transaction: null }));

describe("checkpoints per shard", () => {
  it("are made on each shard's database, verify against its own chain, and shard 0's payload is as before", async () => {
    await creditInShard1(300);
    await createAgent({ credit: 200 }); // a row in shard 0's chain too
    await auditCheckpointJob(env2);
    const jwks = (await api("GET", "/.well-known/jwks.json")).body;
    for (const shard of [0, 1]) {
      const db = dbOfShard(env, shard);
      const checkpoints = await listed(db);
      expect(checkpoints.length).toBeGreaterThan(0);
      const head = await db.prepare("SELECT MAX(seq) AS seq FROM audit_events").first<{ seq: number }>();
      expect(checkpoints[checkpoints.length - 1]!.seq).toBe(head!.seq);
      const payload = payloadOf(checkpoints[0]!.jws);
      // Shard 0 signs exactly the fields it always did; shard 1 names itself besides.
      expect(Object.keys(payload).sort()).toEqual(
        shard === 0
          ? ["fromSeq", "hash", "rowsRoot", "seq", "signedAt"]
          : ["fromSeq", "hash", "rowsRoot", "seq", "shard", "signedAt"],
      );
      expect(decodeProtectedHeader(checkpoints[0]!.jws).typ).toBe(CHECKPOINT_TYP);
      const rows = auditRows({ DB: db, ARCHIVE: env.ARCHIVE });
      const verdict = await verifyCheckpoints({ rows, checkpoints, jwks, anchors: null, shard });
      expect(verdict.problems).toEqual([]);
      expect(verdict.ok).toBe(true);
    }
    // A shard's checkpoints do not pass for another shard's: the payload and the genesis differ.
    const wrong = await verifyCheckpoints({
      rows: auditRows({ DB: shard1, ARCHIVE: env.ARCHIVE }),
      checkpoints: await listed(shard1),
      jwks,
      anchors: null,
      shard: 0,
    });
    expect(wrong.ok).toBe(false);
  });

  it("anchor shard k with the shard above the seq's 64 bits, shard 0 with the plain seq", async () => {
    expect(anchorSeqOf(0, 42)).toBe(42n);
    expect(anchorSeqOf(1, 42)).toBe((1n << 64n) + 42n);
    await creditInShard1(10);
    const made = await makeCheckpoint(env2, Date.now(), place1);
    expect(made.kind).not.toBe("empty");
  });
});

describe("webhooks from shard 1", () => {
  it("reach their endpoint once, even when forwarding crashes between control and the shard", async () => {
    const merchant = await createMerchant();
    const endpoint = await registerEndpoint(`reads-${crypto.randomUUID()}`, { merchantId: merchant.merchantId });
    const eventId = newId("webhookEvent", CONTROL_IDS);
    await shard1
      .prepare(
        "INSERT INTO outbox_events (id, type, merchant_id, data, created_at) VALUES (?, 'charge.succeeded', ?, ?, ?)",
      )
      .bind(eventId, merchant.merchantId, JSON.stringify({ chargeId: "chg_s1_x", amount: 1 }), new Date().toISOString())
      .run();
    // The copy lands in control, then the run dies before the shard marks the event dispatched.
    setFaultHook((point) => {
      if (point === "outbox.after_forward") throw new Error("crash after forward");
    });
    await expect(dispatchOutbox(env2)).rejects.toThrow(/crash after forward/);
    setFaultHook(null);
    const undispatched = await shard1
      .prepare("SELECT dispatched_at AS at FROM outbox_events WHERE id = ?")
      .bind(eventId)
      .first();
    expect(undispatched).toEqual({ at: null });
    // Forwarded again and fanned out: one delivery, the shard's row dispatched; a third run changes nothing.
    await dispatchOutbox(env2);
    await forwardShardOutbox(env2, placementOf(env2).each()[1]!);
    await dispatchOutbox(env2);
    const deliveries = await env.DB.prepare(
      "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE event_id = ? AND endpoint_id = ?",
    )
      .bind(eventId, endpoint.id)
      .first();
    expect(deliveries).toEqual({ n: 1 });
    const copy = await env.DB.prepare("SELECT type, merchant_id AS m, data FROM outbox_events WHERE id = ?")
      .bind(eventId)
      .first();
    expect(copy).toEqual({
      type: "charge.succeeded",
      m: merchant.merchantId,
      data: JSON.stringify({ chargeId: "chg_s1_x", amount: 1 }),
    });
    const dispatched = await shard1
      .prepare("SELECT dispatched_at AS at FROM outbox_events WHERE id = ?")
      .bind(eventId)
      .first<{ at: string | null }>();
    expect(dispatched!.at).not.toBeNull();
  });
});

describe("console figures over shards", () => {
  it("the overview sums both shards' charges; merchants and agents are counted in control", async () => {
    const merchant = await createMerchant();
    await ensureHomeRow(env, "merchant", merchant.merchantId, 1);
    const at = new Date().toISOString();
    await shard1
      .prepare(
        "INSERT INTO charges (id, merchant_id, amount_minor, amount_base_units, status, created_at, paid_at) VALUES (?, ?, 725, 7250000, 'paid', ?, ?)",
      )
      .bind(newId("charge", { shard: 1 }), merchant.merchantId, at, at)
      .run();
    const [control, other, both] = await Promise.all([
      readOverview(env.DB),
      readOverview(shard1),
      readOverviewOfShards(env2),
    ]);
    expect(other.paid.n).toBeGreaterThanOrEqual(1);
    expect(both.paid).toEqual({ n: control.paid.n + other.paid.n, cents: control.paid.cents + other.paid.cents });
    expect(both.paidCentsByHour).toEqual(control.paidCentsByHour.map((c, h) => c + other.paidCentsByHour[h]!));
    expect(both.createdToday).toBe(control.createdToday + other.createdToday);
    expect(both.merchants).toBe(control.merchants);
    expect(both.agents).toBe(control.agents);
    // With one shard, the one database's figures.
    expect(await readOverviewOfShards(env)).toEqual(await readOverview(env.DB));
    const totals = await readPayoutTotals(env2);
    expect(Object.keys(totals)).toEqual(["pending", "paid", "failed"]);
  });
});

/** The CSV's lines, header first. */
async function csvLines(e: Env, options: { shard?: number } = {}) {
  const day = new Date().toISOString().slice(0, 10);
  const range = { fromDay: day, toDay: day, fromIso: `${day}T00:00:00.000Z`, toIso: `${day}T24:00:00.000Z` };
  const text = await csvExportResponse(e, range, options).text();
  return text.split("\r\n").filter((line) => line !== "");
}

describe("the CSV export over shards", () => {
  it("with one shard is the one chain as before; with two, both merged by time, a shard column, and one shard's chain alone", async () => {
    await creditInShard1(111);
    await createAgent({ credit: 222 });
    const one = await csvLines(env);
    expect(one[0]).toBe(
      "seq,createdAt,type,reference,chargeId,agentId,merchantId,amountMinor,currency,data,prevHash,hash",
    );
    const merged = await csvLines(env2);
    expect(merged[0]).toBe(`${one[0]},shard`);
    // Shard 0's rows are the one-shard export's rows, each with its shard appended.
    expect(merged.slice(1).filter((l) => l.endsWith(",0"))).toEqual(one.slice(1).map((l) => `${l},0`));
    const created = merged.slice(1).map((l) => l.split(",")[1]!);
    expect([...created].sort()).toEqual(created);
    const shards = new Set(merged.slice(1).map((l) => l.slice(l.lastIndexOf(",") + 1)));
    expect([...shards].sort()).toEqual(["0", "1"]);

    // `shard` 1 alone: shard 1's rows only, each naming the one before it, from shard 1's genesis.
    const alone = (await csvLines(env2, { shard: 1 })).slice(1);
    expect(alone.length).toBe(merged.filter((l) => l.endsWith(",1")).length);
    const hashes = alone.map((l) => l.split(","));
    const rows = await shard1.prepare("SELECT MIN(seq) AS first FROM audit_events").first<{ first: number }>();
    if (Number(hashes[0]![0]) === rows!.first) expect(hashes[0]![hashes[0]!.length - 3]).toBe(genesisHashOf(1));
    for (let i = 1; i < hashes.length; i++) {
      const row = hashes[i]!;
      const before = hashes[i - 1]!;
      expect(Number(row[0])).toBe(Number(before[0]) + 1);
      expect(row[row.length - 3]).toBe(before[before.length - 2]);
    }
  });

  it("refuses through the API a shard this deployment does not run", async () => {
    const { consoleToken } = await import("../helpers/api");
    const token = await consoleToken();
    for (const path of [
      "/export/transactions.csv?shard=1",
      "/console/audit?shard=1",
      "/console/audit/checkpoints?shard=1",
    ])
      expect((await api("GET", path, { token })).status).toBe(400);
    const page = await api("GET", "/console/audit?shard=0&limit=3", { token });
    expect(page.status).toBe(200);
    expect(page.body).toEqual((await api("GET", "/console/audit?limit=3", { token })).body);
  });
});

describe("the treasury's ledger side over shards", () => {
  it("sums both shards' balances and counts money in transit apart", async () => {
    const x = {
      network: "eip155:84532",
      asset: "0x0000000000000000000000000000000000000001",
      payTo: "0x0000000000000000000000000000000000000002",
    } as unknown as X402Settings;
    await creditInShard1(500);
    await shard1
      .prepare(
        "INSERT INTO ledger_entries (transfer_id, account, amount_minor, amount_base_units, created_at) VALUES (?, 'transit:0', 70, 700000, ?)",
      )
      .bind(`transit_${crypto.randomUUID()}`, new Date().toISOString())
      .run();
    const [control, both] = await Promise.all([readLedgerSnapshot(env, x), readLedgerSnapshot(env2, x)]);
    const shard1Agents = await shard1
      .prepare("SELECT COALESCE(SUM(balance_minor), 0) AS n FROM agents")
      .first<{ n: number }>();
    const shard1Transit = await shard1
      .prepare("SELECT COALESCE(SUM(amount_minor), 0) AS n FROM ledger_entries WHERE account LIKE 'transit:%'")
      .first<{ n: number }>();
    expect(shard1Agents!.n).toBeGreaterThanOrEqual(500);
    expect(both.ledger.agentBalancesMinor).toBe(control.ledger.agentBalancesMinor + shard1Agents!.n);
    expect(both.ledger.inTransitMinor).toBe(control.ledger.inTransitMinor + shard1Transit!.n);
    expect(shard1Transit!.n).toBeGreaterThanOrEqual(70);
    // On-chain figures are untouched by internal money: what the verdict reads does not move.
    expect(both.ledger.onChainInMinor - both.ledger.onChainOutMinor).toBe(
      control.ledger.onChainInMinor - control.ledger.onChainOutMinor,
    );
  });
});

describe("receipts route by the id's shard", () => {
  it("answer 404 for an id tagged with a shard this deployment does not run, not an error", async () => {
    const res = await api("GET", `/charges/${newId("charge", { shard: 5 })}/receipt`);
    expect(res.status).toBe(404);
  });
});

describe("the history archive per shard", () => {
  it("archives shard 1's checkpointed rows under a key of its own, and its chain reads whole from R2 and D1", async () => {
    await creditInShard1(40);
    const store = { DB: shard1, ARCHIVE: env.ARCHIVE };
    const before: unknown[] = [];
    for await (const row of auditRows(store)) before.push(row);
    // Checkpoint the shard's head, then one more row stays young in D1.
    expect((await makeCheckpoint(env2, Date.now(), place1)).kind).not.toBe("empty");
    await creditInShard1(41);
    const run = await archiveHistory(env2, { now: Date.now() + 91 * 86_400_000, at: place1 });
    expect(run.segments).toBeGreaterThan(0);
    const segments = await shard1
      .prepare("SELECT object_key AS key, status FROM archive_segments ORDER BY first_seq")
      .all<{ key: string; status: string }>();
    expect(segments.results.length).toBeGreaterThan(0);
    for (const s of segments.results) {
      expect(s.key).toMatch(/^audit\/shard-1\/\d{15}-\d{15}\.ndjson$/);
      expect(s.status).toBe("done");
    }
    const after: { seq: number; prevHash: string; hash: string }[] = [];
    for await (const row of auditRows(store)) after.push(row);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after[0]!.prevHash).toBe(genesisHashOf(1));
    for (let i = 1; i < after.length; i++) expect(after[i]!.prevHash).toBe(after[i - 1]!.hash);
  });
});

describe("audit verify over two shards", () => {
  it("verifies each shard's chain from its own genesis, and is broken when either shard is", async () => {
    const proofs = settingsOf(env2).proofs;
    await creditInShard1(125);
    const one = await verifyEveryShard(env, proofs, { full: true });
    expect(one.ok).toBe(true);
    expect("shards" in one).toBe(false);
    const both = await verifyEveryShard(env2, proofs, { full: true });
    expect(both.ok).toBe(true);
    expect(both.shards!.map((v) => [v.shard, v.ok])).toEqual([
      [0, true],
      [1, true],
    ]);
    // The top level stays shard 0's verdict when every shard holds.
    expect(both.ok && one.ok && both.headSeq).toBe(one.ok && one.headSeq);

    // Change one amount in shard 1's chain: shard 0 still holds, the answer does not.
    const last = await shard1
      .prepare("SELECT seq FROM audit_events ORDER BY seq DESC LIMIT 1")
      .first<{ seq: number }>();
    await shard1.prepare("UPDATE audit_events SET amount_minor = amount_minor + 1 WHERE seq = ?").bind(last!.seq).run();
    try {
      const broken = await verifyEveryShard(env2, proofs, { full: true });
      expect(broken.ok).toBe(false);
      expect(broken.shards!.find((v) => v.shard === 0)!.ok).toBe(true);
      const one1 = broken.shards!.find((v) => v.shard === 1)!;
      expect(one1).toMatchObject({ ok: false, brokenSeq: last!.seq, problem: "hash_mismatch" });
      expect(broken).toMatchObject({ ok: false, brokenSeq: last!.seq, problem: "hash_mismatch" });
    } finally {
      await shard1
        .prepare("UPDATE audit_events SET amount_minor = amount_minor - 1 WHERE seq = ?")
        .bind(last!.seq)
        .run();
    }
    expect((await verifyEveryShard(env2, proofs, { full: true })).ok).toBe(true);
  });

  it("checks each shard's rows against its own signed checkpoints: rows cut from shard 1's end fail shard 1", async () => {
    const proofs = settingsOf(env2).proofs;
    await creditInShard1(40);
    await creditInShard1(41);
    const made = await makeCheckpoint(env2, Date.now(), place1);
    expect(made.kind).toBe("created");
    const cp = made.kind === "created" ? made.checkpoint : null;
    const clean = await verifyEveryShard(env2, proofs, { full: true });
    expect(clean.ok).toBe(true);
    // Shard 1's checkpoints sign its number: checked as shard 0's, none would hold.
    expect(clean.shards![1]).toMatchObject({ shard: 1, ok: true, checkpoints: { failed: 0, latestSeq: cp!.seq } });
    expect(clean.shards![1]!.checkpoints.checked).toBeGreaterThan(0);

    const cut = (await shard1.prepare("SELECT * FROM audit_events WHERE seq >= ? ORDER BY seq").bind(cp!.seq).all())
      .results;
    const points = (await shard1.prepare("SELECT * FROM audit_verifications").all()).results;
    await shard1.batch([
      shard1.prepare("DELETE FROM audit_events WHERE seq >= ?").bind(cp!.seq),
      shard1.prepare("DELETE FROM audit_verifications"),
    ]);
    try {
      const broken = await verifyEveryShard(env2, proofs, { full: true });
      expect(broken).toMatchObject({ ok: false, brokenSeq: cp!.seq, problem: "checkpoint_contradicts_rows" });
      expect(broken.shards!.map((v) => [v.shard, v.ok])).toEqual([
        [0, true],
        [1, false],
      ]);
      expect(broken.shards![1]!.checkpoints.problems).toEqual([
        {
          kind: "checkpoint_contradicts_rows",
          seq: cp!.seq,
          detail: `the rows end at seq ${cp!.seq - 1}: rows removed from the end`,
        },
      ]);
    } finally {
      for (const row of [...cut, ...points]) {
        const table = "prev_hash" in row ? "audit_events" : "audit_verifications";
        const columns = Object.keys(row);
        await shard1
          .prepare(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
          .bind(...columns.map((c) => row[c]))
          .run();
      }
    }
    expect((await verifyEveryShard(env2, proofs, { full: true })).ok).toBe(true);
  });
});
