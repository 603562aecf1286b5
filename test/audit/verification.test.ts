import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { auditRowOf } from "../../src/audit/service";
import { VERIFICATION_TYP } from "../../src/audit/verification";
import type { ProofSettings } from "../../src/config/proofs";
import type { auditEvents } from "../../src/db/schema";
import { type AuditRow, chainHash } from "../../src/ledger/chain";
import { signJws } from "../../src/proofs/keys";
import { api, consoleToken } from "../helpers/api";
import { archiveAll, auditVerify, checkpointNow, segments } from "../helpers/archive";
import { createAgent, creditAgent } from "../helpers/factories";
import { TEST_RECEIPT_KEYS } from "../helpers/receipt-keys";

/*
 * GET /console/audit/verify remembers the last point it verified (audit_verifications) and re-hashes
 * only the rows after it; `full=true` re-hashes from genesis. The remembered row itself is read back
 * and must still be the row verified. The tests run in order on one database and put back every
 * row they change.
 */

type Stored = typeof auditEvents.$inferSelect;

const verify = (full = false) => auditVerify({ full });

/** What every answer adds before the first checkpoint: none compared, and the anchors not read here. */
const NO_CHECKPOINTS = {
  checkpoints: { checked: 0, failed: 0, latestSeq: null, problems: [] },
  anchorsChecked: false,
  note: expect.stringContaining("npm run --silent cli -- audit verify"),
};

const remembered = async () =>
  (
    await env.DB.prepare(
      "SELECT seq, hash, from_seq AS fromSeq, verified_at AS verifiedAt FROM audit_verifications ORDER BY seq",
    ).all<{ seq: number; hash: string; fromSeq: number; verifiedAt: string }>()
  ).results;

const SELECT_ROWS = `SELECT seq, type, reference, charge_id AS chargeId, agent_id AS agentId, merchant_id AS merchantId,
  amount_minor AS amountMinor, amount_base_units AS amountBaseUnits, currency, data, created_at AS createdAt, prev_hash AS prevHash, hash FROM audit_events`;

const allRows = async () => (await env.DB.prepare(`${SELECT_ROWS} ORDER BY seq`).all<Stored>()).results;
const head = async () => (await allRows()).at(-1)!;

/** Writes a row's columns back as `row` has them (content and both hashes). */
const writeRow = (row: Stored) =>
  env.DB.prepare("UPDATE audit_events SET amount_minor = ?, data = ?, prev_hash = ?, hash = ? WHERE seq = ?").bind(
    row.amountMinor,
    row.data,
    row.prevHash,
    row.hash,
    row.seq,
  );

/** Runs `body` with row `seq`'s amount raised by one (its hash left as it was), then puts it back. */
async function withAmountChanged(seq: number, body: () => Promise<void>) {
  const [original] = (await env.DB.prepare(`${SELECT_ROWS} WHERE seq = ?`).bind(seq).all<Stored>()).results;
  await env.DB.prepare("UPDATE audit_events SET amount_minor = amount_minor + 1 WHERE seq = ?").bind(seq).run();
  try {
    await body();
  } finally {
    await writeRow(original!).run();
  }
}

/** Audit rows made now: one manual credit each. */
async function moreRows(agentId: string, n: number) {
  for (let i = 0; i < n; i++) await creditAgent(agentId, 1 + i);
}

let agentId: string;

beforeAll(async () => {
  agentId = (await createAgent({ credit: 1_000 })).agentId;
  await moreRows(agentId, 4);
});

describe("a remembered verification", () => {
  it("is not remembered when the verification fails", async () => {
    expect(await remembered()).toEqual([]);
    await withAmountChanged(2, async () => {
      expect(await verify()).toMatchObject({ ok: false, brokenSeq: 2, problem: "hash_mismatch", from: 0 });
      expect(await remembered()).toEqual([]);
    });
  });

  it("the first verification re-hashes from genesis and remembers the head it reached", async () => {
    const last = await head();
    const verdict = await verify();
    expect(verdict).toEqual({
      ok: true,
      rows: last.seq,
      headSeq: last.seq,
      headHash: last.hash,
      full: false,
      from: 0,
      checked: last.seq,
      ...NO_CHECKPOINTS,
    });
    expect(await remembered()).toMatchObject([{ seq: last.seq, hash: last.hash, fromSeq: 0 }]);
  });

  it("the next re-hashes only the rows after the remembered point, and moves the point to the new head", async () => {
    const point = await head();
    await moreRows(agentId, 2);
    const last = await head();
    expect(last.seq).toBe(point.seq + 2);
    expect(await verify()).toEqual({
      ok: true,
      rows: last.seq,
      headSeq: last.seq,
      headHash: last.hash,
      full: false,
      from: point.seq,
      checked: 2,
      ...NO_CHECKPOINTS,
    });
    expect(await remembered()).toMatchObject([{ seq: last.seq, hash: last.hash, fromSeq: point.seq }]);
    // Nothing new: nothing re-hashed, the point stays.
    expect(await verify()).toMatchObject({ ok: true, headSeq: last.seq, from: last.seq, checked: 0 });
  });

  it("does not see a row before the point edited in place; full=true does, and remembers nothing then", async () => {
    const point = (await remembered())[0]!;
    await withAmountChanged(2, async () => {
      expect(await verify()).toMatchObject({ ok: true, from: point.seq });
      expect(await verify(true)).toEqual({
        ok: false,
        rows: 2,
        brokenSeq: 2,
        problem: "hash_mismatch",
        full: true,
        from: 0,
        checked: 2,
        ...NO_CHECKPOINTS,
      });
      expect(await remembered()).toEqual([point]);
    });
    const whole = await verify(true);
    expect(whole).toMatchObject({ ok: true, full: true, from: 0, checked: point.seq, headSeq: point.seq });
    // A full pass renews the point: it was checked from genesis.
    expect(await remembered()).toMatchObject([{ seq: point.seq, hash: point.hash, fromSeq: 0 }]);
  });

  it("finds a row after the point that was changed, keeps the point, and fails again until it is put back", async () => {
    const point = await head();
    await moreRows(agentId, 3);
    await withAmountChanged(point.seq + 2, async () => {
      const broken = { ok: false, brokenSeq: point.seq + 2, problem: "hash_mismatch", from: point.seq, checked: 2 };
      expect(await verify()).toMatchObject(broken);
      expect(await remembered()).toMatchObject([{ seq: point.seq, hash: point.hash }]);
      expect(await verify()).toMatchObject(broken);
    });
    const last = await head();
    expect(await verify()).toMatchObject({ ok: true, headSeq: last.seq, from: point.seq, checked: 3 });
    expect(await remembered()).toMatchObject([{ seq: last.seq, hash: last.hash, fromSeq: point.seq }]);
  });

  it("finds the remembered row itself edited in place, at its seq", async () => {
    const point = await head();
    expect(await remembered()).toMatchObject([{ seq: point.seq }]);
    await withAmountChanged(point.seq, async () => {
      expect(await verify()).toMatchObject({
        ok: false,
        brokenSeq: point.seq,
        problem: "hash_mismatch",
        from: point.seq,
        checked: 0,
      });
      expect(await verify(true)).toMatchObject({ ok: false, brokenSeq: point.seq, problem: "hash_mismatch" });
    });
    // Its link to the row before rewritten: named as a full pass names it.
    await env.DB.prepare("UPDATE audit_events SET prev_hash = ? WHERE seq = ?").bind("f".repeat(64), point.seq).run();
    try {
      expect(await verify()).toMatchObject({ ok: false, brokenSeq: point.seq, problem: "prev_hash_mismatch" });
    } finally {
      await writeRow(point).run();
    }
    expect(await verify()).toMatchObject({ ok: true, from: point.seq, checked: 0 });
  });

  it("finds a chain rewritten whole with fresh hashes: it recomputes from genesis, but not to the hash remembered", async () => {
    const original = await allRows();
    const point = original.at(-1)!;
    // Row 1's amount changed and every hash after recomputed: the chain holds on its own.
    let prevHash = original[0]!.prevHash;
    const rewritten = original.map((record, i) => {
      const row: AuditRow = { ...auditRowOf(record), prevHash };
      if (i === 0) row.amountMinor! += 1;
      row.hash = chainHash(prevHash, row.seq, row);
      prevHash = row.hash;
      return { ...record, amountMinor: row.amountMinor!, prevHash: row.prevHash, hash: row.hash };
    });
    await env.DB.batch(rewritten.map(writeRow));
    try {
      const broken = { ok: false, brokenSeq: point.seq, problem: "hash_mismatch" };
      expect(await verify()).toMatchObject({ ...broken, from: point.seq, checked: 0 });
      // The full pass re-hashes every row without fault; the remembered row tells.
      expect(await verify(true)).toMatchObject({ ...broken, from: 0, checked: point.seq });
      expect(await remembered()).toMatchObject([{ seq: point.seq, hash: point.hash }]);
    } finally {
      await env.DB.batch(original.map(writeRow));
    }
    expect(await verify()).toMatchObject({ ok: true, from: point.seq });
  });

  it("finds the rows removed from the end, the remembered one with them", async () => {
    const point = await head();
    await env.DB.prepare("DELETE FROM audit_events WHERE seq = ?").bind(point.seq).run();
    try {
      expect(await verify()).toMatchObject({ ok: false, brokenSeq: point.seq, problem: "seq_gap", from: point.seq });
      // From genesis the rows left hold; the remembered row is gone.
      expect(await verify(true)).toMatchObject({
        ok: false,
        brokenSeq: point.seq,
        problem: "seq_gap",
        checked: point.seq - 1,
      });
    } finally {
      await env.DB.prepare(
        `INSERT INTO audit_events (seq, type, reference, charge_id, agent_id, merchant_id, amount_minor, amount_base_units,
           currency, data, created_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
        .bind(...Object.values(point))
        .run();
    }
    expect(await verify()).toMatchObject({ ok: true, headSeq: point.seq });
  });

  it("ignores a point the signing key did not sign: a D1 writer cannot move it past a row they changed", async () => {
    const genuine = (await env.DB.prepare("SELECT * FROM audit_verifications").first<{ seq: number }>())!;
    const last = await head();
    // Signed by the key rotated out (still published), with its columns moved forward, or not signed at all.
    const oldKey: ProofSettings = { signingKey: { ...TEST_RECEIPT_KEYS[0] }, publishedKeys: [] };
    const payload = { seq: last.seq, hash: last.hash, fromSeq: 0, verifiedAt: new Date().toISOString() };
    const forgeries = [
      { ...payload, jws: await signJws(oldKey, VERIFICATION_TYP, payload) },
      {
        ...payload,
        seq: last.seq + 10,
        jws: (await env.DB.prepare("SELECT jws FROM audit_verifications").first<{ jws: string }>())!.jws,
      },
      { ...payload, jws: "not.a.jws" },
    ];
    await withAmountChanged(3, async () => {
      for (const forged of forgeries) {
        await env.DB.batch([
          env.DB.prepare("DELETE FROM audit_verifications"),
          env.DB.prepare(
            "INSERT INTO audit_verifications (seq, hash, from_seq, verified_at, jws) VALUES (?, ?, ?, ?, ?)",
          ).bind(forged.seq, forged.hash, forged.fromSeq, forged.verifiedAt, forged.jws),
        ]);
        expect(await verify()).toMatchObject({ ok: false, brokenSeq: 3, problem: "hash_mismatch", from: 0 });
      }
    });
    // From genesis again, and the point is the service's own once more.
    expect(await verify()).toMatchObject({ ok: true, from: 0, checked: last.seq });
    expect(await remembered()).toMatchObject([{ seq: genuine.seq, fromSeq: 0 }]);
  });

  it("the transactions page verifies from the remembered point too, and moves it", async () => {
    const point = await head();
    await moreRows(agentId, 1);
    const res = await api("GET", "/console/ui/transactions", {
      headers: { cookie: `console_session=${await consoleToken()}` },
    });
    expect(res.status).toBe(200);
    expect(res.text).toContain(`verified · ${point.seq + 1} events`);
    expect(await remembered()).toMatchObject([{ seq: point.seq + 1, fromSeq: point.seq }]);
  });
});

describe("with archived history", () => {
  it("reads the remembered row from its segment, and full=true re-hashes the segments from genesis", async () => {
    const point = await head();
    expect(await verify()).toMatchObject({ ok: true, headSeq: point.seq });
    await moreRows(agentId, 2);
    await checkpointNow();
    await archiveAll();
    const [segment] = await segments();
    expect(segment).toMatchObject({ firstSeq: 1, status: "done" });
    expect(segment!.lastSeq).toBeGreaterThanOrEqual(point.seq);
    const live = await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events WHERE seq <= ?").bind(point.seq).first();
    expect(live).toEqual({ n: 0 });

    const last = await head();
    expect(await verify()).toMatchObject({ ok: true, headSeq: last.seq, from: point.seq, checked: 2 });
    expect(await verify(true)).toMatchObject({ ok: true, headSeq: last.seq, from: 0, checked: last.seq });

    // An archived row changed in R2: only the full pass reads that far back.
    const object = await env.ARCHIVE.get(segment!.objectKey);
    const text = await object!.text();
    const lines = text.split("\n");
    lines[2] = JSON.stringify({ ...JSON.parse(lines[2]!), amountMinor: JSON.parse(lines[2]!).amountMinor + 1 });
    await env.ARCHIVE.put(segment!.objectKey, lines.join("\n"));
    try {
      expect(await verify()).toMatchObject({ ok: true, from: last.seq, checked: 0 });
      expect(await verify(true)).toMatchObject({ ok: false, brokenSeq: 2, problem: "hash_mismatch", from: 0 });
    } finally {
      await env.ARCHIVE.put(segment!.objectKey, text);
    }
    expect(await verify(true)).toMatchObject({ ok: true, headSeq: last.seq, checked: last.seq });
  });
});
