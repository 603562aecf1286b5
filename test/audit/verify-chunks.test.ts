import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { AUDIT_VERIFY_CHUNK } from "../../src/audit/verification";
import { auditVerifyJob } from "../../src/audit/verify-job";
import { GENESIS_HASH } from "../../src/ledger/chain";
import { Invocation, runInvocation } from "../../src/lib/invocation";
import { api, consoleToken } from "../helpers/api";
import { auditVerify, checkpointNow } from "../helpers/archive";
import { appendAuditRows, lastAuditRow } from "../helpers/audit-rows";

/*
 * A long audit history is verified in bounded steps: a request re-hashes one chunk (AUDIT_VERIFY_CHUNK
 * rows) at most and remembers how far it got, the next step continues there, and the cron's job takes
 * steps while its invocation has room. A changed row is found by the step that reaches it. The rows
 * are written straight into this file's own database (nothing here moves money), so a history of
 * tens of thousands of rows takes a second.
 */

const CHUNK = AUDIT_VERIFY_CHUNK;
/** Three steps: two whole chunks and a part. */
const HISTORY = 2 * CHUNK + 1_000;

type Point = { seq: number; hash: string; fromSeq: number; verifiedAt: string };

const remembered = async () =>
  (
    await env.DB.prepare(
      "SELECT seq, hash, from_seq AS fromSeq, verified_at AS verifiedAt FROM audit_verifications ORDER BY seq",
    ).all<Point>()
  ).results;

const headRow = () => lastAuditRow(env.DB);
const appendRows = (n: number) => appendAuditRows(env.DB, GENESIS_HASH, n);

/** Runs `body` with row `seq`'s amount raised by one (its hash left as it was), then puts it back. */
async function withRowChanged(seq: number, body: () => Promise<void>) {
  const change = (by: number) =>
    env.DB.prepare("UPDATE audit_events SET amount_minor = amount_minor + ? WHERE seq = ?").bind(by, seq).run();
  await change(1);
  try {
    await body();
  } finally {
    await change(-1);
  }
}

/** An invocation with room for `steps` more steps: the job must ask before each and stop when told no. */
class RoomFor extends Invocation {
  asked = 0;
  constructor(private steps: number) {
    super();
  }
  override left(): boolean {
    this.asked++;
    return this.steps-- > 0;
  }
}

const runJob = (invocation: Invocation) => runInvocation(invocation, () => auditVerifyJob(env));

beforeAll(async () => {
  expect(await appendRows(HISTORY)).toMatchObject({ seq: HISTORY });
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("audit verification in bounded steps", () => {
  it("a request re-hashes one chunk at most, remembers how far it got, and the next continues there", async () => {
    const head = (await headRow())!;
    const seen: number[] = [];
    for (const through of [CHUNK, 2 * CHUNK]) {
      const step = await auditVerify({ full: false });
      seen.push(step.checked);
      expect(step).toMatchObject({
        ok: true,
        full: false,
        from: through - CHUNK,
        rows: through,
        headSeq: through,
        progress: { throughSeq: through, lastSeq: head.seq },
      });
      expect(await remembered()).toMatchObject([{ seq: through, fromSeq: through - CHUNK }]);
    }
    // The last step reaches the head: the verdict is the one a single pass gave, without progress.
    const last = await auditVerify({ full: false });
    seen.push(last.checked);
    expect(last).toMatchObject({ ok: true, from: 2 * CHUNK, rows: head.seq, headSeq: head.seq, headHash: head.hash });
    expect(last).not.toHaveProperty("progress");
    expect(seen).toEqual([CHUNK, CHUNK, HISTORY - 2 * CHUNK]);
    expect(await remembered()).toMatchObject([{ seq: head.seq, hash: head.hash, fromSeq: 2 * CHUNK }]);
    // Nothing new: nothing re-hashed.
    expect(await auditVerify({ full: false })).toMatchObject({ ok: true, checked: 0, headSeq: head.seq });
  });

  it("a full pass goes step by step beside the point, and a row changed in a later chunk stops it there", async () => {
    const head = (await headRow())!;
    const point = (await remembered())[0]!;
    const changed = CHUNK + 3_000;
    await withRowChanged(changed, async () => {
      // The point's own verification does not go back that far.
      expect(await auditVerify({ full: false })).toMatchObject({ ok: true, checked: 0 });
      const first = await auditVerify({ full: true });
      expect(first).toMatchObject({ ok: true, full: true, from: 0, checked: CHUNK, progress: { throughSeq: CHUNK } });
      // The pass's progress is kept beside the point, which stays as it was.
      expect(await remembered()).toEqual([point]);
      const broken = { ok: false, full: true, brokenSeq: changed, problem: "hash_mismatch", from: CHUNK };
      expect(await auditVerify({ full: true })).toMatchObject({ ...broken, checked: changed - CHUNK });
      // It fails again, from where it stopped, until someone looks.
      expect(await auditVerify({ full: true })).toMatchObject(broken);
      expect(await remembered()).toEqual([point]);
    });
    expect(await auditVerify({ full: true })).toMatchObject({ ok: true, from: CHUNK, checked: CHUNK });
    const end = await auditVerify({ full: true });
    expect(end).toMatchObject({ ok: true, full: true, from: 2 * CHUNK, checked: head.seq - 2 * CHUNK });
    expect(end).not.toHaveProperty("progress");
    // Reaching the end from genesis renews the point, and the next full=true starts a new pass.
    expect(await remembered()).toMatchObject([{ seq: head.seq, fromSeq: 0 }]);
    expect(await auditVerify({ full: true })).toMatchObject({ ok: true, from: 0, checked: CHUNK });
  });

  it("the cron job takes a step while its invocation has room, and the next run goes on from there", async () => {
    // The full pass left under way by the last test is carried on once the point is at the head.
    const start = (await headRow())!;
    await appendRows(HISTORY);
    const head = (await headRow())!;
    const one = new RoomFor(1);
    await runJob(one);
    expect(one.asked).toBe(2);
    expect(await remembered()).toMatchObject([{ seq: start.seq + CHUNK, fromSeq: start.seq }]);

    const changed = start.seq + CHUNK + 10;
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    await withRowChanged(changed, async () => {
      await runJob(new RoomFor(5));
      // The step that reached the row found it, said so, and the point stays before it.
      expect(errors.mock.calls.map((c) => String(c[0])).join("\n")).toMatch(
        new RegExp(`"audit_chain_broken".*"brokenSeq":${changed}`),
      );
      expect(await remembered()).toMatchObject([{ seq: start.seq + CHUNK }]);
      expect(await auditVerify({ full: false })).toMatchObject({ ok: false, brokenSeq: changed });
    });
    // A run with room enough goes to the head, then carries the full pass under way to the end.
    await runJob(new Invocation());
    expect(await remembered()).toMatchObject([{ seq: head.seq, fromSeq: 0 }]);
    const after = await auditVerify({ full: false });
    expect(after).toMatchObject({ ok: true, checked: 0, headSeq: head.seq });
    expect(after).not.toHaveProperty("progress");
  });

  it("the transactions page does one step at most and says how far the verification got", async () => {
    const before = (await headRow())!;
    await appendRows(CHUNK + 5);
    const head = (await headRow())!;
    const res = await api("GET", "/console/ui/transactions", {
      headers: { cookie: `console_session=${await consoleToken()}` },
    });
    expect(res.status).toBe(200);
    expect(res.text).toContain(`verified through seq ${before.seq + CHUNK} of ${head.seq}`);
    expect(await remembered()).toMatchObject([{ seq: before.seq + CHUNK, fromSeq: before.seq }]);
  });

  it("a checkpoint a later step reaches is compared then, and one the rows contradict stops the pass there", async () => {
    // Signs the head in checkpoints of at most 20,000 rows: the first ends past the first steps.
    await checkpointNow();
    const first = await env.DB.prepare("SELECT seq, hash FROM audit_checkpoints ORDER BY seq LIMIT 1").first<{
      seq: number;
      hash: string;
    }>();
    expect(first!.seq).toBeGreaterThan(2 * CHUNK);
    const storeHash = (hash: string) =>
      env.DB.prepare("UPDATE audit_checkpoints SET hash = ? WHERE seq = ?").bind(hash, first!.seq).run();
    const fullPass = async () => {
      const steps: Awaited<ReturnType<typeof auditVerify>>[] = [];
      for (let i = 0; i < 20; i++) {
        const step = await auditVerify({ full: true });
        steps.push(step);
        if (!step.ok || !step.progress) break;
      }
      return steps;
    };
    await storeHash("0".repeat(64));
    try {
      const steps = await fullPass();
      expect(steps.length).toBeGreaterThan(2);
      // The steps before it hold and compare no checkpoint; the one that reaches it names it.
      for (const step of steps.slice(0, -1)) expect(step).toMatchObject({ ok: true, checkpoints: { checked: 0 } });
      expect(steps.at(-1)).toMatchObject({ ok: false, brokenSeq: first!.seq, problem: "signature_invalid" });
    } finally {
      await storeHash(first!.hash);
    }
    // Put back, the pass goes on from the last step that held, through both checkpoints, to the end.
    const steps = await fullPass();
    expect(steps.at(-1)).toMatchObject({ ok: true, full: true, checkpoints: { failed: 0 } });
    expect(steps.at(-1)).not.toHaveProperty("progress");
    // 20,000 ends a step: the next, continuing from that row, compares its checkpoint again, then 27,005's.
    expect(steps.map((s) => s.checkpoints.checked)).toEqual([1, 1, 1]);
  });
});
