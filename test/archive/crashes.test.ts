import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { archiveHistory } from "../../src/archive/archive";
import { segmentKey } from "../../src/audit/segment";
import { type FaultPoint, setFaultHook } from "../../src/lib/faults";
import {
  archiveAll,
  auditVerify,
  checkpointNow,
  entriesMade,
  expectBalancedWithArchive,
  exportToday,
  FUTURE,
  segments,
} from "../helpers/archive";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { injectOnce as crashOnceAt } from "../helpers/faults";

/*
 * A crash at each step of archiving a segment (after the object is written, after it is verified,
 * between delete batches) loses no row and duplicates none: every reader answers as before the
 * run, and the next run resumes and finishes the segment. A key never holds two segments.
 */

afterEach(() => setFaultHook(null));

const liveRows = async () => (await env.DB.prepare("SELECT COUNT(*) AS n FROM audit_events").first<{ n: number }>())!.n;

/** A few payments, a checkpoint of them, and one payment after it (the head, which stays). */
async function historyToArchive() {
  const merchant = await createMerchant({ name: "Crash Co" });
  const agent = await createAgent({ credit: 5_000 });
  for (const cents of [11, 22, 33]) {
    const charge = await createCharge(merchant.apiKey, cents);
    expect((await payCharge(agent.apiKey, charge.chargeId)).status).toBe(200);
  }
  const checkpoint = await checkpointNow();
  const late = await createCharge(merchant.apiKey, 44);
  expect((await payCharge(agent.apiKey, late.chargeId)).status).toBe(200);
  return checkpoint;
}

/** What must not change while a segment is archived, crash or not. */
async function snapshot() {
  return { csv: await exportToday(), verdict: await auditVerify(), entries: await entriesMade() };
}

async function expectUnchanged(before: Awaited<ReturnType<typeof snapshot>>) {
  expect(await exportToday()).toBe(before.csv);
  expect(await auditVerify()).toEqual(before.verdict);
  await expectBalancedWithArchive(before.entries);
}

describe("a crash while archiving", () => {
  const steps: [FaultPoint, string][] = [
    ["archive.after_write", "planned"],
    ["archive.after_verify", "verified"],
    ["archive.during_delete", "verified"],
  ];
  for (const [point, statusAfterCrash] of steps) {
    it(`at ${point} loses and duplicates nothing, and the next run finishes the segment`, async () => {
      const checkpoint = await historyToArchive();
      const before = await snapshot();
      const rowsBefore = await liveRows();
      const fired = crashOnceAt(point);
      await expect(archiveAll({ deleteBatch: 2 })).rejects.toThrow(`injected fault at ${point}`);
      expect(fired()).toBe(true);

      const segment = (await segments()).at(-1)!;
      expect(segment).toMatchObject({ lastSeq: checkpoint.seq, status: statusAfterCrash });
      const written = await (await env.ARCHIVE.get(segment.objectKey))!.text();
      const live = await liveRows();
      if (point === "archive.during_delete") {
        // One batch of two rows went: the rest are still in D1, and read from R2 with no double.
        expect(live).toBe(rowsBefore - 2);
      } else expect(live).toBe(rowsBefore);
      await expectUnchanged(before);

      expect(await archiveAll({ deleteBatch: 2 })).toEqual({ segments: 1, unfinished: false });
      const done = (await segments()).at(-1)!;
      expect(done).toMatchObject({ firstSeq: segment.firstSeq, lastSeq: checkpoint.seq, status: "done" });
      // The resumed run kept the object it had written.
      expect(await (await env.ARCHIVE.get(done.objectKey))!.text()).toBe(written);
      expect(await liveRows()).toBe(rowsBefore - segment.rows);
      await expectUnchanged(before);
    });
  }

  it("never overwrites another object at a segment's key: it stops, keeps the rows, and resumes once it is gone", async () => {
    const checkpoint = await historyToArchive();
    const before = await snapshot();
    const rowsBefore = await liveRows();
    const firstSeq = (await segments()).at(-1)!.lastSeq + 1;
    const key = segmentKey(firstSeq, checkpoint.seq);
    await env.ARCHIVE.put(key, "not a segment\n");
    await expect(archiveAll()).rejects.toThrow(/does not verify/);
    expect(await (await env.ARCHIVE.get(key))!.text()).toBe("not a segment\n");
    expect(await liveRows()).toBe(rowsBefore);
    expect((await segments()).at(-1)).toMatchObject({ firstSeq, status: "planned" });
    await expectUnchanged(before);

    await env.ARCHIVE.delete(key);
    expect(await archiveAll()).toEqual({ segments: 1, unfinished: false });
    await expectUnchanged(before);
  });

  it("does no more than its time budget allows, and says a segment is left for the next run", async () => {
    await historyToArchive();
    const before = await snapshot();
    crashOnceAt("archive.after_verify");
    await expect(archiveAll()).rejects.toThrow();
    setFaultHook(null);
    // A run whose budget is spent touches nothing, and reports the verified segment left half-way.
    expect(await archiveHistory(env, { now: FUTURE(), budgetMs: 0 })).toEqual({ segments: 0, unfinished: true });
    expect((await segments()).at(-1)!.status).toBe("verified");
    await expectUnchanged(before);
    expect(await archiveAll({ deleteBatch: 1 })).toEqual({ segments: 1, unfinished: false });
    await expectUnchanged(before);
  });
});
