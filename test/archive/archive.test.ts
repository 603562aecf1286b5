import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { archiveHistory } from "../../src/archive/archive";
import { parseSegment, segmentProblem } from "../../src/audit/segment";
import type { Env } from "../../src/config/env";
import { GENESIS_HASH } from "../../src/ledger/chain";
import type { EvidenceFile } from "../../src/receipts/evidence-verify";
import { verifyEvidence } from "../../src/receipts/evidence-verify";
import { api } from "../helpers/api";
import {
  allAuditPages,
  archiveAll,
  auditVerify,
  checkpointNow,
  entriesMade,
  expectBalancedWithArchive,
  exportToday,
  segments,
} from "../helpers/archive";
import { cronTick } from "../helpers/cron";
import { createAgent, createCharge, createMerchant, merchantBalance, payCharge } from "../helpers/factories";
import { refund } from "../helpers/money-out";

/*
 * History archived to R2: checkpointed audit rows and ledger entries past ARCHIVE_AFTER_DAYS move
 * to signed, hash-linked segments, and everything that reads history (the CSV export, audit pages,
 * audit verify, receipts, evidence files) answers exactly as before. The crash tests are in
 * ./crashes.test.ts.
 */

const keys = async () => (await api("GET", "/.well-known/jwks.json")).body;
const liveSeqs = async () =>
  (await env.DB.prepare("SELECT seq FROM audit_events ORDER BY seq").all<{ seq: number }>()).results.map((r) => r.seq);

describe("archiving history to R2", () => {
  let merchant: { merchantId: string; apiKey: string };
  const chargeIds: string[] = [];
  let refundId: string;
  let before: { csv: string; pages: unknown[]; verdict: unknown; receipts: string[]; refundReceipt: string };
  let evidenceBefore: EvidenceFile;
  let checkpointSeq: number;
  let entries: number;

  it("leaves everything readable as before: export byte for byte, pages, verify, receipts, evidence", async () => {
    merchant = await createMerchant({ name: "Archive Co" });
    const agent = await createAgent({ credit: 10_000 });
    for (const cents of [101, 202, 303, 404]) {
      const charge = await createCharge(merchant.apiKey, cents);
      expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
      chargeIds.push(charge.chargeId);
    }
    const made = await refund(merchant.apiKey, chargeIds[0]!, { amountUsdCents: 50 });
    expect(made.status).toBe(201);
    refundId = made.body.refund.refundId;
    checkpointSeq = (await checkpointNow()).seq;
    // A payment after the checkpoint: not covered, so it stays in D1.
    const late = await createCharge(merchant.apiKey, 55);
    expect((await payCharge(agent.apiKey, late.chargeId)).status).toBe(200);

    const receiptOf = async (path: string, t?: string) => {
      const res = await api("GET", path, t ? { token: t } : {});
      expect(res.status).toBe(200);
      return res.text;
    };
    before = {
      csv: await exportToday(),
      pages: await allAuditPages(),
      verdict: await auditVerify(),
      receipts: await Promise.all(chargeIds.map((id) => receiptOf(`/charges/${id}/receipt`))),
      refundReceipt: await receiptOf(`/merchant/refunds/${refundId}/receipt`, merchant.apiKey),
    };
    const early = await api("GET", `/merchant/charges/${chargeIds[1]}/evidence`, { token: merchant.apiKey });
    expect(early.status).toBe(200);
    evidenceBefore = early.body;
    entries = await entriesMade();
    const balanceBefore = await merchantBalance(merchant.apiKey);

    // Not yet due: nothing moves.
    expect(await archiveHistory(env)).toEqual({
      segments: 0,
      unfinished: false,
    });
    expect(await segments()).toEqual([]);

    const run = await archiveAll();
    expect(run).toEqual({ segments: 1, unfinished: false });
    const [segment] = await segments();
    expect(segment).toMatchObject({ firstSeq: 1, lastSeq: checkpointSeq, prevHash: GENESIS_HASH, status: "done" });
    expect(segment!.objectKey).toBe(
      `audit/${String(1).padStart(15, "0")}-${String(checkpointSeq).padStart(15, "0")}.ndjson`,
    );
    // Only the rows after the checkpoint are left in D1.
    expect((await liveSeqs())[0]).toBe(checkpointSeq + 1);
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM ledger_entries").first<{ n: number }>())!.n).toBeLessThan(
      entries,
    );

    expect(await exportToday()).toBe(before.csv);
    // The same bytes, field order included, wherever the rows are kept.
    expect(JSON.stringify(await allAuditPages())).toBe(JSON.stringify(before.pages));
    expect(await auditVerify()).toEqual(before.verdict);
    for (const [i, id] of chargeIds.entries()) {
      const res = await api("GET", `/charges/${id}/receipt`);
      expect(res.text).toBe(before.receipts[i]);
    }
    const refundReceipt = await api("GET", `/merchant/refunds/${refundId}/receipt`, { token: merchant.apiKey });
    expect(refundReceipt.text).toBe(before.refundReceipt);
    const evidence = await api("GET", `/merchant/charges/${chargeIds[1]}/evidence`, { token: merchant.apiKey });
    expect(evidence.status).toBe(200);
    expect(JSON.stringify({ ...evidence.body, exportedAt: null })).toBe(
      JSON.stringify({ ...evidenceBefore, exportedAt: null }),
    );
    const verdict = await verifyEvidence(evidence.body, { keys: await keys(), anchors: null });
    expect(verdict.checks.filter((c) => c.outcome === "failed")).toEqual([]);

    expect(await merchantBalance(merchant.apiKey)).toBe(balanceBefore);
    await expectBalancedWithArchive(entries);
  });

  it("writes a segment that verifies on its own: body hash, chain from genesis, counts, signature", async () => {
    const [segment] = await segments();
    const object = await env.ARCHIVE.get(segment!.objectKey);
    const text = await object!.text();
    const parsed = parseSegment(text);
    expect(parsed.header).toMatchObject({
      format: "agent-pay-archive-segment/1",
      firstSeq: 1,
      lastSeq: checkpointSeq,
      rows: checkpointSeq,
      prevHash: GENESIS_HASH,
    });
    expect(parsed.rows.map((r) => r.seq)).toEqual(Array.from({ length: checkpointSeq }, (_, i) => i + 1));
    expect(parsed.entries.reduce((sum, e) => sum + e.amountMinor, 0)).toBe(0);
    expect(await segmentProblem(text, parsed.header, await keys())).toBeNull();
    // Any change to a row breaks it.
    const forged = text.replace('"amountMinor":202', '"amountMinor":2020');
    expect(forged).not.toBe(text);
    expect(await segmentProblem(forged, parsed.header, await keys())).toMatch(/bodySha256|chain/);
  });

  it("never archives the head, and links the next segment to the last", async () => {
    const agent = await createAgent({ credit: 200 });
    const charge = await createCharge(merchant.apiKey, 66);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    // The checkpoint covers the head itself: the head still stays in D1 for the sequencer.
    const head = await checkpointNow();
    await archiveAll();
    const all = await segments();
    expect(all).toHaveLength(2);
    expect(all[1]).toMatchObject({ firstSeq: checkpointSeq + 1, lastSeq: head.seq - 1, status: "done" });
    expect(all[1]!.prevHash).toBe(all[0]!.lastHash);
    expect(await liveSeqs()).toEqual([head.seq]);
    // Payments go on from the head; the chain still verifies end to end, across both segments and D1.
    const next = await createCharge(merchant.apiKey, 77);
    expect((await payCharge(agent.apiKey, next.chargeId)).status).toBe(200);
    const verdict = await auditVerify();
    expect(verdict.ok).toBe(true);
    expect(verdict.rows).toBeGreaterThan(head.seq);
    await expectBalancedWithArchive();
    // The old head is no longer the head: checkpointed, it goes now; then nothing is due.
    expect(await archiveAll()).toEqual({ segments: 1, unfinished: false });
    expect((await segments())[2]).toMatchObject({ firstSeq: head.seq, lastSeq: head.seq, status: "done" });
    expect(await archiveAll()).toEqual({ segments: 0, unfinished: false });
    expect((await auditVerify()).ok).toBe(true);
    await expectBalancedWithArchive();
  });

  it("runs on the minute cron: with ARCHIVE_AFTER_DAYS=0 everything checkpointed but the head goes", async () => {
    const agent = await createAgent({ credit: 300 });
    for (const cents of [12, 34]) {
      const charge = await createCharge(merchant.apiKey, cents);
      expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
    }
    const head = await checkpointNow();
    const csv = await exportToday();
    await cronTick({ ...env, ARCHIVE_AFTER_DAYS: "0" } as Env);
    expect((await segments()).at(-1)).toMatchObject({ lastSeq: head.seq - 1, status: "done" });
    expect(await liveSeqs()).toEqual([head.seq]);
    expect(await exportToday()).toBe(csv);
    await expectBalancedWithArchive();
  });
});
