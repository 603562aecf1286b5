import type { Env } from "../config/env";
import { settingsOf } from "../config/env";
import { placementOf } from "../ledger/place";
import { shardField } from "../ledger/shard-labels";
import type { Spend } from "../lib/invocation";
import { log } from "../lib/log";
import { roomFor } from "../lib/room";
import { type AuditVerdict, fullPassUnderWay, verifyAudit } from "./verification";

/*
 * The cron's part of audit verification: every run carries each shard's verification on from the
 * point it remembered, a bounded step (AUDIT_VERIFY_CHUNK rows) at a time, until the head, then a
 * full pass someone asked for (`full=true`) until it too reaches the end. A request then finds little
 * left to re-hash, and a history however long is verified over as many runs as it needs.
 */

/**
 * What one step may spend at most, asked of the invocation before each: the point and the
 * checkpoints' first reads, the point's row, the rows (2 a page of 1,000: the page and the look for
 * an archived segment before it), the checkpoints' pages, the head and the point written: 18-20 D1
 * queries measured for a step of 5,000 rows, 7 for one with nothing new; twice that is asked. R2
 * reads of archived segments are subrequests: a step spans a few at most.
 */
export const AUDIT_VERIFY_STEP_COST: Record<Spend, number> = { d1Queries: 40, subrequests: 10 };

/**
 * The most steps one run takes, over every shard: 10 steps of 5,000 rows are about 0.5-1 s of CPU,
 * the heaviest bounded work a cron invocation does (the `cpu_ms` of wrangler.toml leaves room for it).
 */
export const AUDIT_VERIFY_STEPS_PER_RUN = 10;

/** Carries the verification of every shard on by bounded steps while the invocation has room; see above. */
export async function auditVerifyJob(env: Env, now = Date.now()): Promise<void> {
  const proofs = settingsOf(env).proofs;
  let steps = 0;
  for (const at of placementOf(env).each()) {
    const store = { DB: at.db, ARCHIVE: env.ARCHIVE };
    let full = false;
    for (;;) {
      // Its bound, not the work, stops the run (said in the log): the next one continues from the points remembered.
      if (steps >= AUDIT_VERIFY_STEPS_PER_RUN) {
        log.info("audit_verify_bounded", { ...shardField(at.shard), steps });
        return;
      }
      if (!roomFor(AUDIT_VERIFY_STEP_COST, "audit_verify", { ...shardField(at.shard), steps })) return;
      steps++;
      const verdict: AuditVerdict = await verifyAudit(store, proofs, { full, now, shard: at.shard });
      if (!verdict.ok) {
        // Said every run until someone looks: the requests' verdict says the same.
        const { brokenSeq, problem } = verdict;
        log.error("audit_chain_broken", { ...shardField(at.shard), full, brokenSeq, problem });
        break;
      }
      if (verdict.progress) continue;
      if (full || !(await fullPassUnderWay(at.db, proofs))) break;
      full = true;
    }
  }
}
