import type { Env } from "../config/env";
import type { CommitResult } from "../ledger/ledger.do";
import { placeOfMadeId } from "../ledger/made-places";
import { type Place, placementOf } from "../ledger/place";
import { agentX402ReleasedPlan, agentX402SettledPlan, type DecidedX402Payment } from "../ledger/x402-out";
import { nowIso } from "../lib/time";
import { type AgentX402PaymentRow, agentX402PaymentView } from "./x402-payments";

/*
 * The life of an agent's outbound x402 payment after it is authorized: the reconciliation's reads of
 * the payments still `authorized`, and the two batches that end that state (settled, released). The
 * chain decides which (src/x402/outbound/life.ts); these only write what it decided, once.
 */

/** An authorized payment as the reconciliation reads it: the row, and what the chain is asked about it. */
export interface DueAgentX402Payment extends AgentX402PaymentRow {
  nonce: `0x${string}`;
  headerValue: string;
  recordedBlock: number | null;
  updatedAt: string;
}

/** How long a payment rests after a look before the reconciliation looks at it again. */
export const LOOK_AGAIN_AFTER_MS = 20_000;

const DUE_SELECT = `SELECT id, agent_id AS agentId, resource, pay_to AS payTo, network, asset,
  CAST(amount_base_units AS TEXT) AS amountBaseUnits, valid_before AS validBefore, status, tx_hash AS txHash,
  created_at AS createdAt, settled_at AS settledAt, nonce, header_value AS headerValue,
  recorded_block AS recordedBlock, updated_at AS updatedAt FROM agent_x402_payments`;

/** The authorized payments of one place not looked at for LOOK_AGAIN_AFTER_MS, the one looked at longest ago first. */
export async function dueAgentX402Payments(db: D1Database, now: number, limit: number): Promise<DueAgentX402Payment[]> {
  const rows = await db
    .prepare(`${DUE_SELECT} WHERE status = 'authorized' AND updated_at <= ? ORDER BY updated_at LIMIT ?`)
    .bind(nowIso(now - LOOK_AGAIN_AFTER_MS), limit)
    .all<DueAgentX402Payment>();
  return rows.results;
}

/**
 * A look's turn: the row unchanged since this worker read it. Two reconciliations running at once
 * read the same due rows; only one takes each, and the other moves on (the batches' guards would
 * keep a second outcome out all the same).
 */
export async function claimLook(env: Env, p: DueAgentX402Payment, now: number): Promise<boolean> {
  const result = await placeOfMadeId(placementOf(env), p.id)
    .db.prepare(
      "UPDATE agent_x402_payments SET updated_at = ? WHERE id = ? AND status = 'authorized' AND updated_at = ?",
    )
    .bind(nowIso(now), p.id, p.updatedAt)
    .run();
  return result.meta.changes === 1;
}

const decided = (p: DueAgentX402Payment): DecidedX402Payment => ({
  id: p.id,
  agentId: p.agentId,
  network: p.network,
  amountBaseUnits: BigInt(p.amountBaseUnits),
  nonce: p.nonce,
});

/** The payment `settled` by `transaction`, in its home; refused (X402_OUT_DECIDED) when already decided. */
export async function settleAgentX402Payment(
  env: Env,
  p: DueAgentX402Payment,
  transaction: string,
  now = Date.now(),
): Promise<CommitResult> {
  const at = nowIso(now);
  const event = agentX402PaymentView({ ...p, status: "settled", txHash: transaction, settledAt: at });
  return placeOfMadeId(placementOf(env), p.id).commit(agentX402SettledPlan(decided(p), transaction, at, { ...event }));
}

/**
 * The payment `released` and its debit given back, in its home. Run in the agent's wallet turn
 * (WalletDO.releaseX402), so the wallet reads its balance again after the credit.
 */
export async function releaseAgentX402Payment(
  env: Env,
  p: DueAgentX402Payment,
  reason: string,
  now = Date.now(),
): Promise<CommitResult> {
  const at = nowIso(now);
  const event = agentX402PaymentView({ ...p, status: "released", txHash: null, settledAt: null });
  return placeOfMadeId(placementOf(env), p.id).commit(agentX402ReleasedPlan(decided(p), at, { ...event }, reason));
}

/** What the settlement address has promised and not yet paid: authorizations signed and not yet settled or released. */
export interface OutstandingAuthorizations {
  count: number;
  totalBaseUnits: bigint;
  /** Settled since the time asked about (0 when none was). */
  settledSinceBaseUnits: bigint;
}

/**
 * One place's outstanding authorizations (a count and an exact sum), and with `settledSince` (an
 * ISO time) the sum of those recorded settled since then as well: what a token balance read at that
 * time has not yet seen leave. A settlement's row is last written when it is settled, so its
 * `updated_at` is that moment (index `agent_x402_payments_due`).
 */
async function outstandingIn(place: Place, settledSince: string | null): Promise<OutstandingAuthorizations> {
  const row = await place.db
    .prepare(
      `SELECT COUNT(*) AS count, CAST(COALESCE(SUM(amount_base_units), 0) AS TEXT) AS total,
         (SELECT CAST(COALESCE(SUM(amount_base_units), 0) AS TEXT) FROM agent_x402_payments
          WHERE status = 'settled' AND updated_at >= ?) AS settledSince
       FROM agent_x402_payments WHERE status = 'authorized'`,
    )
    .bind(settledSince ?? "9999")
    .first<{ count: number; total: string; settledSince: string }>();
  return {
    count: row?.count ?? 0,
    totalBaseUnits: BigInt(row?.total ?? "0"),
    settledSinceBaseUnits: BigInt(row?.settledSince ?? "0"),
  };
}

/** Every place's outstanding authorizations, summed: one read per ledger shard, side by side. */
export async function outstandingAuthorizations(
  env: Env,
  settledSince: string | null = null,
): Promise<OutstandingAuthorizations> {
  const parts = await Promise.all(
    placementOf(env)
      .each()
      .map((place) => outstandingIn(place, settledSince)),
  );
  return parts.reduce(
    (sum, one) => ({
      count: sum.count + one.count,
      totalBaseUnits: sum.totalBaseUnits + one.totalBaseUnits,
      settledSinceBaseUnits: sum.settledSinceBaseUnits + one.settledSinceBaseUnits,
    }),
    { count: 0, totalBaseUnits: 0n, settledSinceBaseUnits: 0n },
  );
}
