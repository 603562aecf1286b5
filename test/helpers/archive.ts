import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { archiveHistory } from "../../src/archive/archive";
import { makeCheckpoint } from "../../src/checkpoints/checkpoints";
import { api, consoleToken } from "./api";

/** A moment past the default ARCHIVE_AFTER_DAYS (90): everything checkpointed is due. */
export const FUTURE = () => Date.now() + 91 * 86_400_000;

/** Archives everything a checkpoint covers, as a cron run 91 days from now would. */
export const archiveAll = (options: { deleteBatch?: number } = {}) =>
  archiveHistory(env, { now: FUTURE(), ...options });

/** Signs a checkpoint of the head now. */
export async function checkpointNow() {
  const made = await makeCheckpoint(env);
  if (made.kind === "empty") throw new Error("no audit rows to checkpoint");
  return made.checkpoint;
}

/** The CSV export of today (UTC), as text. */
export async function exportToday(): Promise<string> {
  const today = new Date().toISOString().slice(0, 10);
  const res = await api("GET", `/export/transactions.csv?from=${today}&to=${today}`, { token: await consoleToken() });
  expect(res.status).toBe(200);
  return res.text;
}

/** Every /console/audit page, concatenated. */
export async function allAuditPages(limit = 7): Promise<unknown[]> {
  const token = await consoleToken();
  const events: unknown[] = [];
  let after = 0;
  for (;;) {
    const res = await api("GET", `/console/audit?afterSeq=${after}&limit=${limit}`, { token });
    expect(res.status).toBe(200);
    events.push(...res.body.events);
    if (res.body.nextAfterSeq === null) return events;
    after = res.body.nextAfterSeq;
  }
}

/** GET /console/audit/verify, from genesis by default: the whole history, archived segments included. */
export async function auditVerify({ full = true } = {}) {
  const res = await api("GET", `/console/audit/verify${full ? "?full=true" : ""}`, { token: await consoleToken() });
  expect(res.status).toBe(200);
  return res.body as {
    ok: boolean;
    rows: number;
    headSeq: number;
    headHash: string;
    full: boolean;
    from: number;
    checked: number;
    /** While a bounded step stopped before the chain's end. */
    progress?: { throughSeq: number; lastSeq: number };
    brokenSeq?: number;
    problem?: string;
    checkpoints: {
      checked: number;
      failed: number;
      latestSeq: number | null;
      problems: { kind: string; seq: number; detail: string }[];
    };
    anchorsChecked: false;
    note: string;
  };
}

/**
 * The ledger with archived entries: every agent's and merchant's balance is its carried total plus
 * its live entries, all entries (carried and live) sum to zero, and none is counted twice.
 */
export async function expectBalancedWithArchive(expectedEntries?: number) {
  const totals = await env.DB.prepare(
    `SELECT (SELECT COALESCE(SUM(carried_base_units), 0) FROM archived_balances)
              + (SELECT COALESCE(SUM(amount_base_units), 0) FROM ledger_entries) AS total,
            (SELECT COALESCE(SUM(entries), 0) FROM archived_balances) + (SELECT COUNT(*) FROM ledger_entries) AS n`,
  ).first<{ total: number; n: number }>();
  expect(totals?.total).toBe(0);
  if (expectedEntries !== undefined) expect(totals?.n).toBe(expectedEntries);
  const balanceOf = (account: string) =>
    `COALESCE((SELECT carried_base_units FROM archived_balances WHERE account = ${account}), 0)
     + COALESCE((SELECT SUM(amount_base_units) FROM ledger_entries WHERE account = ${account}), 0)`;
  const mismatched = await env.DB.prepare(
    `SELECT a.id FROM agents a WHERE a.balance_base_units != ${balanceOf("'agent:' || a.id")}
     UNION ALL SELECT m.id FROM merchants m WHERE m.balance_base_units != ${balanceOf("'merchant:' || m.id")}`,
  ).all();
  expect(mismatched.results).toEqual([]);
}

/** Ledger entries made so far, archived or not. */
export async function entriesMade(): Promise<number> {
  const row = await env.DB.prepare(
    `SELECT (SELECT COALESCE(SUM(entries), 0) FROM archived_balances) + (SELECT COUNT(*) FROM ledger_entries) AS n`,
  ).first<{ n: number }>();
  return row?.n ?? 0;
}

/** The segments recorded in D1, oldest first. */
export async function segments() {
  const { results } = await env.DB.prepare(
    `SELECT first_seq AS firstSeq, last_seq AS lastSeq, prev_hash AS prevHash, last_hash AS lastHash,
       object_key AS objectKey, status, rows, entries FROM archive_segments ORDER BY first_seq`,
  ).all<{
    firstSeq: number;
    lastSeq: number;
    prevHash: string;
    lastHash: string;
    objectKey: string;
    status: string;
    rows: number;
    entries: number;
  }>();
  return results;
}
