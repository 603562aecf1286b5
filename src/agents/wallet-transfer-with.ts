import { chargeView } from "../charges/service";
import { dbOfShard } from "../db/shards";
import { PENDING_FIGURE, reservationHeldStatement, type IdempotencySlot } from "../db/idempotency";
import { settingsOf, type Env } from "../env";
import { ownerShard, UnknownOwner } from "../ledger/directory";
import { guard, guards, sqlStatement, type SqlStatement } from "../db/statements";
import { ledgerOf, type CommitResult } from "../ledger/ledger.do";
import { AGENT_FROZEN, chargeAudit, chargePaidStatements, payableChecks, paymentEventData } from "../ledger/movements";
import type { CommitPlan } from "../ledger/plan";
import { postingStatements } from "../ledger/postings";
import { sendPlan, TRANSFER_ALREADY_ARRIVED, type CrossShardPayment } from "../ledger/transfers";
import { codeWith } from "../lib/error-codes";
import { faultPoint } from "../lib/faults";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import { outboxEvents } from "../webhooks/outbox";
import { paidBody, type PaidView, type PayOutcome } from "./outcomes";
import { POLICY_REASONS } from "./policy";
import { driveTransfer } from "./wallet-transfer";
import type { PayableSnapshot, WalletTurnCall } from "./wallet-state";

/*
 * An adapter over the cross-shard transfer (ledger/transfers.ts, agents/wallet-transfer.ts, which it
 * does not change) for the payments that carry more than a stored charge: a charge born with its
 * payment (a checkout link's, a PayLink draw's), statements on the merchant's side (a grant's
 * figures), and statements on the agent's side (an approval being granted). It builds its own
 * arrival plan and sends it with `sendPlan`; the transfer row keeps that plan, so `driveTransfer`
 * (inline, the wallet's alarm and the `transfer_recover` cron alike) applies exactly it.
 */

/** What the transfer keeps to answer the request (the shape wallet-transfer.ts reads back). */
interface TransferAnswer {
  charge: ReturnType<typeof chargeView>;
  slot?: WalletTurnCall["slot"];
  template?: string;
}

/** Where the extras of a payment go when its sides live on two shards. */
export interface CrossShardExtras {
  view: PaidView;
  method?: "ledger" | "paylink";
  /** Statements on the merchant's shard, first in the arrival: creating the charge being paid. */
  prelude?: SqlStatement[];
  /** Statements on the merchant's shard, in the arrival: a grant's guard and figures. */
  extraStatements?: SqlStatement[];
  auditData?: Record<string, unknown>;
  /** Statements on the agent's shard, in the send (P1): an approval's guard and its flip to granted. */
  payerStatements?: SqlStatement[];
}

/**
 * P2 with extras: the charge created first when `prelude` births it, `extraStatements` (a grant's guard
 * and figures) before it is paid, the method and audit data as a same-shard payment writes them.
 */
export function arrivalPlanWith(p: CrossShardPayment, options: CrossShardExtras): CommitPlan {
  const { charge } = p;
  const method = options.method ?? "ledger";
  const prelude = options.prelude ?? [];
  const data = paymentEventData(charge, p.agentId, method, p.reference);
  return {
    statements: [
      // First: a second arrival must be refused before the prelude meets the charge it created.
      guard(TRANSFER_ALREADY_ARRIVED, "NOT EXISTS (SELECT 1 FROM ledger_arrivals WHERE id = ?)", p.reference),
      ...prelude,
      guards(...payableChecks(charge)),
      ...(options.extraStatements ?? []),
      ...chargePaidStatements(charge, p.agentId, method, p.reference, p.paidAt, prelude.length > 0),
      ...postingStatements(
        p.reference,
        [{ from: `transit:${p.fromShard}`, to: `merchant:${charge.merchantId}`, amountMinor: charge.amountMinor }],
        p.paidAt,
      ),
      sqlStatement(
        `INSERT INTO ledger_arrivals (id, from_shard, outcome, reason, balance_after, created_at)
         VALUES (?, ?, 'applied', NULL, (SELECT balance_minor FROM merchants WHERE id = ?), ?)`,
        p.reference,
        p.fromShard,
        charge.merchantId,
        p.paidAt,
      ),
      outboxEvents(charge.merchantId, data, p.paidAt, "payment.succeeded", "charge.succeeded"),
    ],
    audit: [
      chargeAudit(
        "charge.paid",
        charge,
        { reference: p.reference, agentId: p.agentId, at: p.paidAt },
        { method, description: charge.description, ...options.auditData },
      ),
    ],
  };
}

const commitOrNothing = async (call: WalletTurnCall, shard: number, plan: CommitPlan) => {
  try {
    return await ledgerOf(call.env, shard).commit(plan);
  } catch {
    return undefined;
  }
};

const transferLanded = async (call: WalletTurnCall, shard: number, id: string) =>
  (await dbOfShard(call.env, shard).prepare("SELECT 1 AS x FROM ledger_transfers WHERE id = ?").bind(id).first()) !==
  null;

/** A refusal's reason as a 409 when it is one, else as given (a grant's own `paylink_grant_changed`). */
const conflictReason = (reason: string) => {
  try {
    return codeWith(409, reason);
  } catch {
    return reason as ReturnType<typeof codeWith<409>>;
  }
};

/**
 * Pays `charge` (in shard `to`, created by the arrival when `options.prelude` births it) from the
 * agent's wallet in shard `from`, as commitAcrossShards does for a stored charge: P1, then P2 and P3
 * inline, the turn kept until the transfer is decided, the same answers as a same-shard payment.
 */
export async function commitAcrossShardsWith(
  call: WalletTurnCall,
  charge: PayableSnapshot,
  options: CrossShardExtras,
  { from, to }: { from: number; to: number },
): Promise<PayOutcome> {
  const { agentId, turn, slot } = call;
  const paidAt = nowIso();
  const reference = newId("payment", from);
  const method = options.method ?? "ledger";
  const paidCharge = chargeView({ ...charge, status: "paid", agentId, method, reference, paidAt });
  const payment: CrossShardPayment = { charge, agentId, fromShard: from, toShard: to, reference, paidAt };
  const answer: TransferAnswer = slot
    ? {
        charge: paidCharge,
        slot,
        template: JSON.stringify(paidBody(options.view, { charge: paidCharge, merchantBalanceMinor: PENDING_FIGURE })),
      }
    : { charge: paidCharge };
  const context = { abort: turn.abort };
  const end = turn.cache.hold(charge.amountMinor);
  let ended = false;
  const finish = (how: Parameters<typeof end>[0]) => {
    if (!ended) end(how);
    ended = true;
  };
  try {
    faultPoint("payment.before_commit", context);
    await turn.intents?.remember(reference, from);
    const before = [...(slot ? [reservationHeldStatement(slot)] : []), ...(options.payerStatements ?? [])];
    const sent: CommitResult | undefined = await commitOrNothing(
      call,
      from,
      sendPlan(payment, arrivalPlanWith(payment, options), before, JSON.stringify(answer)),
    );
    if (sent?.kind !== "committed" && !(await transferLanded(call, from, reference))) {
      await turn.intents?.done(reference);
      if (!sent) throw new Error(`transfer ${reference}: the send did not land`);
      const balance = sent.reason === POLICY_REASONS.balance;
      const frozen = sent.reason === AGENT_FROZEN;
      finish(balance || frozen ? "unsure" : "unchanged");
      if (frozen) return { kind: "frozen" };
      return balance
        ? { kind: "rejected", reason: POLICY_REASONS.balance }
        : { kind: "conflict", reason: conflictReason(sent.reason) };
    }
    faultPoint("transfer.after_send", context);
    const state = await driveTransfer(call.env, from, reference, context);
    if (state.status === "completed") {
      await turn.intents?.done(reference);
      finish("committed");
      return { kind: "paid", charge: paidCharge, merchantBalanceMinor: state.merchantBalanceMinor };
    }
    if (state.status === "reversed") {
      await turn.intents?.done(reference);
      finish("unsure");
      return { kind: "conflict", reason: conflictReason(state.reason) };
    }
    throw new Error(`transfer ${reference} is still pending: its recovery will finish it`);
  } finally {
    finish("unsure");
  }
}

const DAY_MS = 24 * 3600_000;

/**
 * A retry whose first answer was lost across shards: the request's 5xx freed its key before the
 * transfer it sent was settled, so no answer was stored, and the route would pay again (a draw, a
 * checkout payment make a new charge each time; an approval would be found granted). This finds the
 * agent's transfers sent under the same key (kept 24 h, as keys are), drives any still pending, and
 * answers the first completed one's 200 body, as that request would have been answered. A transfer
 * still pending after that throws (a 5xx: the key is freed for a retry that finds it decided).
 * Nothing to read with one shard: no transfer exists there.
 */
export async function earlierAnswerUnderKey(
  env: Env,
  agentId: string,
  slot: IdempotencySlot | undefined,
): Promise<Record<string, unknown> | null> {
  if (!slot || settingsOf(env).ledgerShards === 1) return null;
  let home: number;
  try {
    home = await ownerShard(env, "agent", agentId);
  } catch (error) {
    if (error instanceof UnknownOwner) return null;
    throw error;
  }
  const { results } = await dbOfShard(env, home)
    .prepare(
      `SELECT id FROM ledger_transfers WHERE agent_id = ? AND created_at >= ? AND status <> 'reversed'
         AND json_extract(answer, '$.slot.scope') = ? AND json_extract(answer, '$.slot.key') = ?`,
    )
    .bind(agentId, nowIso(Date.now() - DAY_MS), slot.scope, slot.key)
    .all<{ id: string }>();
  for (const { id } of results) {
    const state = await driveTransfer(env, home, id);
    if (state.status === "pending") throw new Error(`transfer ${id} sent under this key is still pending`);
    if (state.status !== "completed" || !state.answer.template) continue;
    return JSON.parse(
      state.answer.template.replace(
        `"merchantBalanceMinor":${PENDING_FIGURE}`,
        `"merchantBalanceMinor":${state.merchantBalanceMinor}`,
      ),
    ) as Record<string, unknown>;
  }
  return null;
}
