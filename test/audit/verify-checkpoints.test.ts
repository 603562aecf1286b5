import { env } from "cloudflare:workers";
import { CompactSign, generateKeyPair } from "jose";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CHECKPOINT_TYP } from "../../src/audit/checkpoints-verify";
import { auditRows } from "../../src/audit/service";
import { CheckpointCheck } from "../../src/audit/stored-checkpoints";
import { makeCheckpoint } from "../../src/checkpoints/checkpoints";
import { settingsOf } from "../../src/config/settings";
import { type AuditRow, chainHash, GENESIS_HASH } from "../../src/ledger/chain";
import { api, consoleToken } from "../helpers/api";
import { auditVerify } from "../helpers/archive";
import { createAgent } from "../helpers/factories";
import { restoreRows, rowsOf } from "../helpers/tables";

/*
 * GET /console/audit/verify against the signed checkpoints stored with the rows: the two attacks the
 * chain alone cannot see (rows removed from the end, the chain rewritten with fresh hashes), made on
 * D1 directly by someone who can write it but does not hold the signing key. They remove the
 * remembered point too (audit_verifications), which makes the next verification one from genesis.
 * Every test starts from the same untouched rows and checkpoints.
 */

let original: Record<string, Record<string, unknown>[]>;
/** The checkpoints as signed before any tampering, oldest first. */
let signed: { seq: number; fromSeq: number; hash: string }[];
const TABLES = ["audit_events", "audit_checkpoints", "audit_verifications"];

const forgetPoint = () => env.DB.prepare("DELETE FROM audit_verifications").run();

/** Every row rewritten: the first one's amount changed, then each hash made afresh, so the chain holds. */
async function rewriteChain(): Promise<AuditRow[]> {
  const rows: AuditRow[] = [];
  for await (const row of auditRows(env)) rows.push(row);
  let prevHash = GENESIS_HASH;
  const rewritten = rows.map((row) => {
    const draft = { ...row, amountMinor: row.seq === 1 ? row.amountMinor! + 100 : row.amountMinor, prevHash };
    prevHash = chainHash(prevHash, row.seq, draft);
    return { ...draft, hash: prevHash };
  });
  await env.DB.batch(
    rewritten.map((r) =>
      env.DB.prepare("UPDATE audit_events SET amount_minor = ?, prev_hash = ?, hash = ? WHERE seq = ?").bind(
        r.amountMinor,
        r.prevHash,
        r.hash,
        r.seq,
      ),
    ),
  );
  return rewritten;
}

const kinds = (verdict: Awaited<ReturnType<typeof auditVerify>>) =>
  verdict.checkpoints.problems.map(({ kind, seq }) => ({ kind, seq }));

beforeAll(async () => {
  // Three checkpoints with rows between them, and one row after the last.
  for (let i = 0; i < 3; i++) {
    await createAgent({ credit: 100 + i });
    await createAgent({ credit: 200 + i });
    expect((await makeCheckpoint(env)).kind).toBe("created");
  }
  await createAgent({ credit: 300 });
  await auditVerify({ full: true });
  original = Object.fromEntries(await Promise.all(TABLES.map(async (t) => [t, await rowsOf(t)] as const)));
  signed = original.audit_checkpoints!.map((c) => ({
    seq: c.seq as number,
    fromSeq: c.from_seq as number,
    hash: c.hash as string,
  }));
  expect(signed).toHaveLength(3);
});

beforeEach(async () => {
  for (const table of TABLES) await restoreRows(table, original[table]!);
});

describe("the console's verification against the stored checkpoints", () => {
  it("holds for untouched rows: every checkpoint compared when full, those from the point on otherwise", async () => {
    const last = signed[2]!;
    const full = await auditVerify({ full: true });
    expect(full).toMatchObject({
      ok: true,
      checkpoints: { checked: 3, failed: 0, latestSeq: last.seq, problems: [] },
      anchorsChecked: false,
    });
    expect(full.note).toContain("npm run --silent cli -- audit verify");
    // From the remembered head on: no checkpoint reaches that far.
    const quick = await auditVerify({ full: false });
    expect(quick).toMatchObject({ ok: true, checkpoints: { checked: 0, failed: 0, latestSeq: last.seq } });
  });

  it("fails a chain rewritten with fresh hashes, naming the first checkpoint it contradicts", async () => {
    await rewriteChain();
    await forgetPoint();
    for (const full of [true, false]) {
      const verdict = await auditVerify({ full });
      expect(verdict).toMatchObject({
        ok: false,
        brokenSeq: signed[0]!.seq,
        problem: "checkpoint_contradicts_rows",
        from: 0,
        anchorsChecked: false,
      });
      expect(kinds(verdict)).toEqual(signed.map((cp) => ({ kind: "checkpoint_contradicts_rows", seq: cp.seq })));
      expect(verdict.checkpoints).toMatchObject({ checked: 3, failed: 3 });
      expect(verdict.checkpoints.problems[0]!.detail).toContain("the chain was rewritten");
    }
    // Nothing was remembered: the next verification starts from genesis again and fails again.
    expect(await rowsOf("audit_verifications")).toEqual([]);
  });

  it("fails rows removed from the end, naming the checkpoint beyond the last row", async () => {
    const last = signed[2]!;
    await env.DB.prepare("DELETE FROM audit_events WHERE seq >= ?")
      .bind(last.seq - 1)
      .run();
    await forgetPoint();
    const verdict = await auditVerify({ full: true });
    // The rows left hold on their own.
    expect(verdict).toMatchObject({
      ok: false,
      rows: last.seq - 2,
      brokenSeq: last.seq,
      problem: "checkpoint_contradicts_rows",
    });
    expect(kinds(verdict)).toEqual([{ kind: "checkpoint_contradicts_rows", seq: last.seq }]);
    expect(verdict.checkpoints.problems[0]!.detail).toBe(
      `the rows end at seq ${last.seq - 2}: rows removed from the end`,
    );
  });

  it("fails rows removed from the end after the remembered point, which a verification from the point checks", async () => {
    const [, middle, last] = signed;
    // Back when the middle checkpoint was the latest, a verification remembered its head.
    await env.DB.prepare("DELETE FROM audit_events WHERE seq > ?").bind(middle!.seq).run();
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE seq > ?").bind(middle!.seq).run();
    await forgetPoint();
    expect(await auditVerify({ full: true })).toMatchObject({ ok: true, headSeq: middle!.seq });
    // The history went on; then the rows after the point were removed.
    await restoreRows("audit_events", original.audit_events!);
    await restoreRows("audit_checkpoints", original.audit_checkpoints!);
    await env.DB.prepare("DELETE FROM audit_events WHERE seq > ?").bind(middle!.seq).run();
    const verdict = await auditVerify({ full: false });
    expect(verdict).toMatchObject({
      ok: false,
      from: middle!.seq,
      checked: 0,
      brokenSeq: last!.seq,
      problem: "checkpoint_contradicts_rows",
      checkpoints: { checked: 2, failed: 1 },
    });
    expect(kinds(verdict)).toEqual([{ kind: "checkpoint_contradicts_rows", seq: last!.seq }]);
  });

  it("fails checkpoints forged with a stranger's key over a rewritten chain", async () => {
    const rows = await rewriteChain();
    await forgetPoint();
    const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519" });
    for (const cp of signed) {
      const hash = rows.find((r) => r.seq === cp.seq)!.hash;
      const payload = {
        seq: cp.seq,
        hash,
        fromSeq: cp.fromSeq,
        rowsRoot: "0".repeat(64),
        signedAt: "2026-01-01T00:00:00.000Z",
      };
      const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
        .setProtectedHeader({ alg: "EdDSA", kid: "stranger", typ: CHECKPOINT_TYP })
        .sign(privateKey);
      await env.DB.prepare("UPDATE audit_checkpoints SET hash = ?, rows_root = ?, signed_at = ?, jws = ? WHERE seq = ?")
        .bind(hash, payload.rowsRoot, payload.signedAt, jws, cp.seq)
        .run();
    }
    const verdict = await auditVerify({ full: true });
    expect(verdict).toMatchObject({ ok: false, brokenSeq: signed[0]!.seq, problem: "signature_invalid" });
    // The forged heads match the forged rows: only the signatures give them away.
    expect(kinds(verdict)).toEqual(signed.map((cp) => ({ kind: "signature_invalid", seq: cp.seq })));
  });

  it("fails a checkpoint removed from between two others", async () => {
    const [first, middle, last] = signed;
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE seq = ?").bind(middle!.seq).run();
    const verdict = await auditVerify({ full: true });
    expect(verdict).toMatchObject({ ok: false, brokenSeq: last!.seq, problem: "checkpoint_missing" });
    expect(verdict.checkpoints.problems[0]!.detail).toBe(
      `covers from seq ${last!.fromSeq}, but the checkpoint before ends at ${first!.seq}: a checkpoint was removed`,
    );
  });

  it("holds a rewrite whose checkpoints were deleted with it, and says that the anchors were not read", async () => {
    await rewriteChain();
    await forgetPoint();
    await env.DB.prepare("DELETE FROM audit_checkpoints").run();
    const verdict = await auditVerify({ full: true });
    // Nothing left in D1 contradicts it: only the anchors on chain do, which this answer says it does not read.
    expect(verdict).toMatchObject({
      ok: true,
      checkpoints: { checked: 0, latestSeq: null },
      anchorsChecked: false,
    });
    expect(verdict.note).toContain("anchors on chain are not read here");
  });

  it("shows the checkpoint problems on the transactions page, and that the anchors are checked elsewhere", async () => {
    await env.DB.prepare("DELETE FROM audit_events WHERE seq >= ?").bind(signed[2]!.seq).run();
    await forgetPoint();
    const page = await api("GET", "/console/ui/transactions", {
      headers: { cookie: `console_session=${await consoleToken()}` },
    });
    expect(page.status).toBe(200);
    expect(page.text).toContain(`broken at seq ${signed[2]!.seq} (checkpoint_contradicts_rows)`);
    expect(page.text).toContain(`checkpoint seq ${signed[2]!.seq}: checkpoint_contradicts_rows: the rows end at seq`);
    expect(page.text).toContain("anchors on chain are not checked here");
    expect(page.text).toContain("npm run --silent cli -- audit verify");
  });

  it("with full=true names the first checkpoint a rewrite contradicts, not the remembered point", async () => {
    const point = original.audit_verifications![0]!.seq as number;
    await rewriteChain();
    // The point is kept: the full pass re-hashes from genesis, and the checkpoints signed before speak first.
    const verdict = await auditVerify({ full: true });
    expect(verdict).toMatchObject({
      ok: false,
      brokenSeq: signed[0]!.seq,
      problem: "checkpoint_contradicts_rows",
      rows: point,
      from: 0,
    });
    // From the point the rows before it are not read: the remembered row tells, at its seq.
    expect(await auditVerify({ full: false })).toMatchObject({
      ok: false,
      brokenSeq: point,
      problem: "hash_mismatch",
      from: point,
    });
  });

  it("with full=true counts the rows there are when rows past the point were removed", async () => {
    const point = original.audit_verifications![0]!.seq as number;
    const [, middle, last] = signed;
    await env.DB.prepare("DELETE FROM audit_events WHERE seq > ?").bind(middle!.seq).run();
    expect(await auditVerify({ full: true })).toMatchObject({
      ok: false,
      rows: middle!.seq,
      brokenSeq: last!.seq,
      problem: "checkpoint_contradicts_rows",
    });
    // Past every checkpoint only the remembered row is missing: it is named, the rows counted as they are.
    await restoreRows("audit_events", original.audit_events!);
    await env.DB.prepare("DELETE FROM audit_events WHERE seq = ?").bind(point).run();
    expect(await auditVerify({ full: true })).toMatchObject({
      ok: false,
      rows: point - 1,
      checked: point - 1,
      brokenSeq: point,
      problem: "seq_gap",
    });
  });

  it("fails from the point when the latest checkpoint the last verification saw is gone", async () => {
    const [, middle, last] = signed;
    // As after swapping in another table whose checkpoints all lie before the point.
    await env.DB.prepare("DELETE FROM audit_checkpoints WHERE seq = ?").bind(last!.seq).run();
    const verdict = await auditVerify({ full: false });
    expect(verdict).toMatchObject({
      ok: false,
      brokenSeq: last!.seq,
      problem: "checkpoint_missing",
      checkpoints: { checked: 0, failed: 1, latestSeq: middle!.seq },
    });
    expect(verdict.checkpoints.problems[0]!.detail).toContain("the last verification saw it");
    // The full pass says so too: nothing else in D1 shows the checkpoint was there.
    expect(await auditVerify({ full: true })).toMatchObject({
      ok: false,
      brokenSeq: last!.seq,
      problem: "checkpoint_missing",
    });
    // Put in again with another head (a table from elsewhere): from the point it does not hold either.
    await restoreRows("audit_checkpoints", original.audit_checkpoints!);
    await env.DB.prepare("UPDATE audit_checkpoints SET hash = ? WHERE seq = ?").bind("ab".repeat(32), last!.seq).run();
    expect(await auditVerify({ full: false })).toMatchObject({
      ok: false,
      brokenSeq: last!.seq,
      problem: "checkpoint_missing",
    });
  });

  // Last: it appends rows, which the restore before each test would take away from under the sequencer.
  it("does not take a checkpoint signed after the verification started for rows removed from the end", async () => {
    const head = original.audit_events!.at(-1)!.seq as number;
    const check = await CheckpointCheck.open(env.DB, settingsOf(env).proofs, 0, 0);
    // Rows appended and signed while the verification reads: its last page may have come before them.
    await createAgent({ credit: 400 });
    const later = await makeCheckpoint(env);
    expect(later.kind === "created" && later.checkpoint.seq).toBeGreaterThan(head);
    for await (const row of auditRows(env)) if (row.seq <= head) await check.row(row.seq, row.hash);
    expect(await check.finish(head)).toEqual({ checked: 3, failed: 0, latestSeq: signed[2]!.seq, problems: [] });
    // The next verification compares it.
    expect(await auditVerify({ full: true })).toMatchObject({ ok: true, checkpoints: { checked: 4, failed: 0 } });
  });
});
