import { walletOf } from "../agents/wallet.do";
import { type ChargeRow, type ChargeView, chargeRowStatement, chargeView } from "../charges/service";
import { refundedFigure } from "../charges/statements";
import type { Env, X402Settings } from "../config/env";
import { type IdempotencySlot, PENDING_FIGURE, storeTemplateStatements } from "../db/idempotency";
import type { SqlStatement } from "../db/statements";
import { screenAddress } from "../kyt/screening";
import type { CommitResult } from "../ledger/ledger.do";
import { type Place, placementOf } from "../ledger/place";
import { codeWith, INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { ApiError } from "../lib/errors";
import { newId } from "../lib/ids";
import { baseUnitsParam, centsIfWhole, centsToUsdcUnits, wholeCentsOf } from "../lib/money";
import { nowIso } from "../lib/time";
import { merchantBaseUnitsIn } from "../merchants/statements";
import { sendsOut } from "../outbound/authorization";
import { advanceDue, type Completion, runOutbound } from "../outbound/run";
import { settledPayerOf } from "../x402/settlements";
import { type RefundRow, refundedAfter, refundOutcomePlan, walletRefund, x402RefundPlan } from "./plans";

export type { RefundRow } from "./plans";

const REFUND_SELECT = `SELECT id, charge_id AS chargeId, merchant_id AS merchantId, agent_id AS agentId,
  amount_minor AS amountMinor, amount_base_units AS amountBaseUnits, currency, method, destination, status, tx_hash AS txHash,
  failure_reason AS failureReason, created_at AS createdAt FROM refunds`;

/** The refund object of the API. */
export const refundView = (r: RefundRow) => ({
  refundId: r.id,
  chargeId: r.chargeId,
  // As a charge's: null when the amount is not a whole number of cents, which `amountBaseUnits` states.
  amountMinor: centsIfWhole(BigInt(r.amountBaseUnits)),
  amountBaseUnits: String(r.amountBaseUnits),
  currency: r.currency,
  method: r.method,
  status: r.status,
  transaction: r.txHash,
  failureReason: r.failureReason,
  createdAt: r.createdAt,
});

export type RefundView = ReturnType<typeof refundView>;

/**
 * A charge of this merchant, or 404 (another merchant's charge is as unknown as a missing one), read
 * where its id says it lives (`at`): the merchant's home, where its refunds, its balance and its ledger are.
 */
async function merchantCharge(
  env: Env,
  merchantId: string,
  chargeId: string,
): Promise<{ charge: ChargeRow; at: Place }> {
  const at = placementOf(env).ofId(chargeId);
  const charge = at && (await chargeRowStatement(at.db, chargeId).first<ChargeRow>());
  if (!at || !charge || charge.merchantId !== merchantId) throw new ApiError(404, "charge_not_found");
  return { charge, at };
}

/**
 * Refunds a paid charge of the merchant: what remains of it without an amount. The checks here
 * give the refusals; the batch checks the same again (the charge paid, the remaining amount, the
 * merchant's balance), so concurrent refunds and payouts never take more than there is. Everything
 * of the refund is where the charge lives (the merchant's home): the refund row and its id, the
 * debit, the charge's refunded sum. A wallet payment's refund is handed to the ledger's entry in the
 * paying agent's turn (its wallet object), which brings the money to the agent wherever it lives.
 * An x402 payment's is debited in its batch and sent on chain afterwards (`sendRefund`).
 */
export async function createRefund(
  env: Env,
  x: X402Settings | null,
  merchantId: string,
  chargeId: string,
  requested: number | undefined,
  slot: IdempotencySlot | undefined,
  /** A console user refunding for the merchant, for the audit row. */
  by?: string,
): Promise<{ refund: RefundView; charge: ChargeView }> {
  // What remains is read before the batch, and a concurrent refund may take part of it first: the
  // batch then refuses. A refund of what remains reads it again and takes what is left, rather than
  // refusing while something is (a refused batch wrote nothing, its stored answer neither).
  for (let attempt = 1; ; attempt++) {
    const made = await refundOnce(env, x, { merchantId, chargeId, requested, slot, by });
    if (made.kind === "made") return made.made;
    if (requested !== undefined || attempt >= REMAINDER_ATTEMPTS) throw new ApiError(409, codeWith(409, made.reason));
  }
}

/** How many times a refund of what remains is tried when concurrent refunds keep taking part of it. */
const REMAINDER_ATTEMPTS = 3;

type RefundAsked = {
  merchantId: string;
  chargeId: string;
  requested: number | undefined;
  slot: IdempotencySlot | undefined;
  by: string | undefined;
};

/** One try: the refusals of what was read throw; the batch's own refusal is answered for the caller to decide. */
async function refundOnce(
  env: Env,
  x: X402Settings | null,
  { merchantId, chargeId, requested, slot, by }: RefundAsked,
): Promise<{ kind: "made"; made: { refund: RefundView; charge: ChargeView } } | { kind: "refused"; reason: string }> {
  const { charge, at } = await merchantCharge(env, merchantId, chargeId);
  if (charge.status !== "paid" || !charge.method) throw new ApiError(409, "charge_not_paid");
  // Exact: a charge below a cent (or between cents) is refunded to the base unit.
  const remaining = BigInt(charge.amountBaseUnits) - BigInt(charge.refundedBaseUnits);
  const amount = requested === undefined ? remaining : centsToUsdcUnits(requested);
  if (amount <= 0n || amount > remaining) throw new ApiError(409, "refund_exceeds_remaining");

  const refund: RefundRow = {
    id: newId("refund", at),
    chargeId,
    merchantId,
    agentId: charge.agentId,
    amountMinor: wholeCentsOf(amount),
    amountBaseUnits: baseUnitsParam(amount),
    currency: charge.currency,
    method: charge.method,
    destination: null,
    status: charge.method === "x402" ? "pending" : "succeeded",
    txHash: null,
    failureReason: null,
    createdAt: nowIso(),
    ...(by ? { by } : {}),
  };
  let result: CommitResult;
  if (charge.method === "x402") {
    if (!sendsOut(x)) throw new ApiError(503, "treasury_not_configured");
    refund.destination = await refundDestination(env, at, chargeId);
    await requireBalance(at, merchantId, amount);
    const answer = answerStatements(slot, refund, charge);
    result = await at.commit(x402RefundPlan(x, at, { ...refund, destination: refund.destination }, answer));
  } else {
    const agentId = charge.agentId;
    if (!agentId) throw new Error(`wallet charge ${chargeId} has no agent`);
    await requireBalance(at, merchantId, amount);
    const answer = answerStatements(slot, refund, charge);
    // In the agent's turn: its wallet object forgets the balance it keeps, which the refund changes.
    result = await walletOf(env, agentId).refund(walletRefund({ ...refund, agentId }, answer));
  }
  if (result.kind === "refused") return { kind: "refused", reason: result.reason };
  return {
    kind: "made",
    made: { refund: refundView(refund), charge: chargeView({ ...charge, ...refundedAfter(result.results) }) },
  };
}

/** The payer of an x402 charge (the authorization's `from`, its payment kept with the charge), screened as a payout address is. */
async function refundDestination(env: Env, at: Place, chargeId: string): Promise<string> {
  const payer = await settledPayerOf(at.db, chargeId);
  if (!payer) throw new Error(`paid x402 charge ${chargeId} has no settled payment`);
  const kyt = await screenAddress(placementOf(env).control.db, payer);
  if (kyt.verdict !== "pass")
    throw new ApiError(403, "refund_destination_flagged", { verdict: kyt.verdict, reason: kyt.reason });
  return payer.toLowerCase();
}

/** The refusal for a balance below the amount (exact, in base units), before anything is written (the batch guards it again). */
async function requireBalance(at: Place, merchantId: string, baseUnits: bigint): Promise<void> {
  const balance = await merchantBaseUnitsIn(at.db, merchantId);
  if (balance === null || balance < baseUnits) throw new ApiError(409, INSUFFICIENT_BALANCE);
}

/** The answer stored under an Idempotency-Key; the batch writes in the charge's refunded sum after it. */
function answerStatements(slot: IdempotencySlot | undefined, refund: RefundRow, charge: ChargeRow): SqlStatement[] {
  if (!slot) return [];
  const figure = refundedFigure(charge.id);
  // The figure writes `refundedBaseUnits` right after `refundedMinor` (see refundedFigure): the template leaves it out.
  const { refundedBaseUnits: _written, ...after } = chargeView({ ...charge, refundedMinor: PENDING_FIGURE });
  return storeTemplateStatements(
    slot,
    201,
    JSON.stringify({ refund: refundView(refund), charge: after }),
    "refundedMinor",
    figure.sql,
    ...figure.params,
  );
}

/** Records an x402 refund's decided transfer once (see refundOutcomePlan), where the refund lives, which its id names. */
export const completeRefund: Completion = async (env, x, t, outcome) => {
  const at = placementOf(env).ofId(t.ownerId);
  const refund = await at?.db.prepare(`${REFUND_SELECT} WHERE id = ?`).bind(t.ownerId).first<RefundRow>();
  if (!at || !refund) return null;
  return at.commit(refundOutcomePlan(x, t, refund, outcome, nowIso()));
};

/** Sends an x402 refund just taken (or takes the next step with it), and records the outcome once decided. */
export const sendRefund = (env: Env, x: X402Settings, refundId: string) =>
  runOutbound(env, x, "refund", refundId, completeRefund);

/** The cron's pass: x402 refunds whose request stopped before their transfer was decided. */
export const advanceDueRefunds = (env: Env, x: X402Settings, now?: number) =>
  advanceDue(env, x, "refund", completeRefund, now);

/** A charge's refunds, oldest first; 404 unless it is a charge of this merchant. */
export async function listRefunds(env: Env, merchantId: string, chargeId: string): Promise<RefundView[]> {
  const { at } = await merchantCharge(env, merchantId, chargeId);
  const rows = await at.db
    .prepare(`${REFUND_SELECT} WHERE charge_id = ? ORDER BY created_at, rowid`)
    .bind(chargeId)
    .all<RefundRow>();
  return rows.results.map(refundView);
}
