import type { Hex } from "viem";
import type { Env, X402Settings } from "../config/env";
import { type IdempotencySlot, PENDING_FIGURE, storeTemplateStatements } from "../db/idempotency";
import { guard, type SqlStatement, sqlStatement } from "../db/statements";
import { type KytResult, notOnBlocklist, screenAddress, screened } from "../kyt/screening";
import { placeOfMadeId } from "../ledger/made-places";
import { outboxEvent } from "../ledger/outbox";
import { type Place, placementOf } from "../ledger/place";
import type { CommitPlan } from "../ledger/plan";
import { type Account, balanceAfter, centsPosting, postingStatements } from "../ledger/postings";
import { codeWith, INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { ApiError } from "../lib/errors";
import { newId } from "../lib/ids";
import { mergeSorted, newestFirst } from "../lib/merge";
import { nowIso } from "../lib/time";
import {
  merchantBalanceAtLeast,
  merchantBalanceFigure,
  merchantBalanceIn,
  payoutAddressOf,
} from "../merchants/statements";
import { type Advance, outboundOutcomeStatements } from "../outbound/advance";
import { type OutboundTransfer, sendsOut, settlementTransfer } from "../outbound/authorization";
import { advanceDue, type Completion, runOutbound } from "../outbound/run";

export interface PayoutRow {
  id: string;
  merchantId: string;
  amountMinor: number;
  currency: string;
  destination: string;
  status: "pending" | "paid" | "failed";
  txHash: string | null;
  failureReason: string | null;
  createdAt: string;
  paidAt: string | null;
}

export const PAYOUT_SELECT = `SELECT id, merchant_id AS merchantId, amount_minor AS amountMinor, currency, destination,
  status, tx_hash AS txHash, failure_reason AS failureReason, created_at AS createdAt, paid_at AS paidAt FROM payouts`;

/** The payout object of the API. */
export const payoutView = (p: PayoutRow) => ({
  payoutId: p.id,
  merchantId: p.merchantId,
  amountMinor: p.amountMinor,
  currency: p.currency,
  destination: p.destination,
  status: p.status,
  transaction: p.txHash,
  failureReason: p.failureReason,
  createdAt: p.createdAt,
  paidAt: p.paidAt,
});

export type PayoutView = ReturnType<typeof payoutView>;

/** Where money paid out sits in the ledger while it is on its way, and after: outside the service. */
const payoutsAccount = (x: X402Settings): Account => `external:payouts:${x.network}`;

/**
 * Payouts need the settlement address's key (it signs the authorization), a gas key (it sends it)
 * and the chain; without them no payout is taken, rather than one debited that cannot leave.
 */
export function treasuryOf(x: X402Settings | null): X402Settings {
  if (!sendsOut(x)) throw new ApiError(503, "treasury_not_configured");
  return x;
}

/**
 * Takes a payout: screens the payout address again, then debits the merchant, records the payout
 * and the transfer that will send it, and appends its audit row, in one ledger batch (with the
 * answer, under an Idempotency-Key). The transfer is sent afterwards (`sendPayout`). Without an
 * amount the whole balance goes; the batch re-checks the balance, so concurrent payouts never
 * take more than there is. All of it at the merchant's home, where its balance is: the payout's id
 * (and its transfer's) carry that place. The payout address is the merchant's identity, kept in
 * control.
 */
export async function createPayout(
  env: Env,
  x: X402Settings,
  merchantId: string,
  requested: number | undefined,
  slot: IdempotencySlot | undefined,
): Promise<{ payout: PayoutView; balanceMinor: number }> {
  const home = await placementOf(env).ofMerchant(merchantId);
  const merchant = await payableMerchant(env, home, merchantId);
  const amountMinor = requested ?? merchant.balanceMinor;
  if (amountMinor <= 0 || amountMinor > merchant.balanceMinor) throw new ApiError(409, INSUFFICIENT_BALANCE);
  const createdAt = nowIso();
  const payout: PayoutRow = {
    id: newId("payout", home),
    merchantId,
    amountMinor,
    currency: "USD",
    destination: merchant.payoutAddress.toLowerCase(),
    status: "pending",
    txHash: null,
    failureReason: null,
    createdAt,
    paidAt: null,
  };
  const result = await home.commit(payoutPlan(x, home, payout, slot, merchant.blocklistInBatch));
  // The blocklist, read by the batch's guard, has the address (put there since it was set).
  if (result.kind === "refused" && result.reason === FLAGGED) throw flagged(screened(payout.destination, true));
  if (result.kind === "refused") throw new ApiError(409, codeWith(409, result.reason));
  return { payout: payoutView(payout), balanceMinor: balanceAfter(result.results, `merchant:${merchantId}`)! };
}

const FLAGGED = "payout_address_flagged";
const flagged = (kyt: KytResult) => new ApiError(403, FLAGGED, { verdict: kyt.verdict, reason: kyt.reason });

/**
 * The merchant a payout is taken for: its balance (at home) and its payout address (in control),
 * read side by side, the address screened again. 404 for no merchant, 409 without an address, 403
 * for an address screening flags. Where the home is control, which keeps the operators' blocklist,
 * the payout's own batch reads the list (`blocklistInBatch`, a guard): one database round trip less.
 */
async function payableMerchant(
  env: Env,
  home: Place,
  merchantId: string,
): Promise<{ balanceMinor: number; payoutAddress: string; blocklistInBatch: boolean }> {
  const control = placementOf(env).control.db;
  const [payoutAddress, balanceMinor] = await Promise.all([
    payoutAddressOf(control, merchantId),
    merchantBalanceIn(home.db, merchantId),
  ]);
  if (payoutAddress === undefined || balanceMinor === null) throw new ApiError(404, "merchant_not_found");
  if (!payoutAddress) throw new ApiError(409, "payout_address_missing");
  const blocklistInBatch = home.isControl;
  const kyt = blocklistInBatch ? screened(payoutAddress, false) : await screenAddress(control, payoutAddress);
  if (kyt.verdict !== "pass") throw flagged(kyt);
  return { balanceMinor, payoutAddress, blocklistInBatch };
}

/**
 * A payout taken, as one batch at the merchant's home (`home`): the balance guard, the payout, the
 * transfer that sends it, the debit, and the answer under an Idempotency-Key (`slot`), which names
 * the balance after the debit (the batch writes it in: see storeTemplateStatements).
 */
function payoutPlan(
  x: X402Settings,
  home: Place,
  payout: PayoutRow,
  slot: IdempotencySlot | undefined,
  blocklistInBatch: boolean,
): CommitPlan {
  const { id, merchantId, amountMinor, createdAt } = payout;
  const transfer = settlementTransfer(x, {
    purpose: "payout",
    ownerId: id,
    to: payout.destination as Hex,
    amountMinor,
    createdAt,
    at: home,
  });
  const balance = merchantBalanceFigure(merchantId);
  const answer = slot
    ? storeTemplateStatements(
        slot,
        201,
        JSON.stringify({ payout: payoutView(payout), balanceMinor: PENDING_FIGURE }),
        "balanceMinor",
        balance.sql,
        ...balance.params,
      )
    : [];
  return {
    statements: [
      ...(blocklistInBatch ? [guard(...notOnBlocklist(payout.destination, FLAGGED))] : []),
      guard(...merchantBalanceAtLeast(merchantId, amountMinor)),
      sqlStatement(
        `INSERT INTO payouts (id, merchant_id, amount_minor, currency, destination, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`,
        id,
        merchantId,
        amountMinor,
        payout.currency,
        payout.destination,
        createdAt,
        createdAt,
      ),
      transfer.statement,
      ...postingStatements(id, [centsPosting(`merchant:${merchantId}`, payoutsAccount(x), amountMinor)], createdAt),
      ...answer,
    ],
    audit: [
      {
        type: "payout.created",
        reference: id,
        chargeId: null,
        agentId: null,
        merchantId,
        amountMinor,
        currency: payout.currency,
        data: { payoutId: id, destination: payout.destination, network: x.network },
        createdAt,
      },
    ],
  };
}

/** What `payout.paid` and `payout.failed` carry. */
const payoutEventData = (p: PayoutRow, transaction: string | null, failureReason: string | null) => ({
  payoutId: p.id,
  merchantId: p.merchantId,
  amountMinor: p.amountMinor,
  currency: p.currency,
  destination: p.destination,
  transaction,
  failureReason,
});

/**
 * Records a payout's decided transfer, once (the batch requires the transfer still pending): paid
 * with its transaction, or failed with the amount credited back by a reversing posting. Either way
 * the webhook event and the audit row are in the same batch.
 */
export const completePayout: Completion = async (env, x, t, outcome) => {
  // At the payout's place, which its id names (its transfer row is there too).
  const at = placeOfMadeId(placementOf(env), t.ownerId);
  const payout = await at.db.prepare(`${PAYOUT_SELECT} WHERE id = ?`).bind(t.ownerId).first<PayoutRow>();
  if (!payout) return null;
  return at.commit(payoutOutcomePlan(x, t, payout, outcome, nowIso()));
};

function payoutOutcomePlan(
  x: X402Settings,
  t: OutboundTransfer,
  payout: PayoutRow,
  outcome: Exclude<Advance, { kind: "waiting" }>,
  at: string,
) {
  const audit = (type: "payout.paid" | "payout.failed", data: Record<string, unknown>) => ({
    type,
    reference: payout.id,
    chargeId: null,
    agentId: null,
    merchantId: payout.merchantId,
    amountMinor: payout.amountMinor,
    currency: payout.currency,
    data: { payoutId: payout.id, destination: payout.destination, ...data },
    createdAt: at,
  });
  const decided = outboundOutcomeStatements(t, outcome, at);
  if (outcome.kind === "confirmed") {
    const statements: SqlStatement[] = [
      ...decided,
      sqlStatement(
        "UPDATE payouts SET status = 'paid', tx_hash = ?, paid_at = ?, updated_at = ? WHERE id = ? AND status = 'pending'",
        outcome.transaction,
        at,
        at,
        payout.id,
      ),
      outboxEvent("payout.paid", payout.merchantId, payoutEventData(payout, outcome.transaction, null), at),
    ];
    return { statements, audit: [audit("payout.paid", { transaction: outcome.transaction })] };
  }
  const statements: SqlStatement[] = [
    ...decided,
    sqlStatement(
      "UPDATE payouts SET status = 'failed', failure_reason = ?, updated_at = ? WHERE id = ? AND status = 'pending'",
      outcome.reason.slice(0, 300),
      at,
      payout.id,
    ),
    // The debit stays; a new posting gives the amount back.
    ...postingStatements(
      `${payout.id}:reversal`,
      [centsPosting(payoutsAccount(x), `merchant:${payout.merchantId}`, payout.amountMinor)],
      at,
    ),
    outboxEvent("payout.failed", payout.merchantId, payoutEventData(payout, null, outcome.reason), at),
  ];
  return { statements, audit: [audit("payout.failed", { failureReason: outcome.reason })] };
}

/** Sends a payout just taken (or takes the next step with it), and records the outcome once decided. */
export const sendPayout = (env: Env, x: X402Settings, payoutId: string) =>
  runOutbound(env, x, "payout", payoutId, completePayout);

/** The cron's pass: payouts whose request stopped before their transfer was decided. */
export const advanceDuePayouts = (env: Env, x: X402Settings, now?: number) =>
  advanceDue(env, x, "payout", completePayout, now);

/** A payout of this merchant, read where its id says it lives (none in a shard not run here). */
export async function getPayout(env: Env, merchantId: string, payoutId: string): Promise<PayoutRow | null> {
  const at = placementOf(env).ofId(payoutId);
  if (!at) return null;
  return at.db
    .prepare(`${PAYOUT_SELECT} WHERE id = ? AND merchant_id = ?`)
    .bind(payoutId, merchantId)
    .first<PayoutRow>();
}

/** A merchant's payouts (or, without one, all merchants'), newest first, optionally of one status. */
export async function listPayouts(
  env: Env,
  filter: { merchantId?: string; status?: PayoutRow["status"]; limit: number },
): Promise<PayoutRow[]> {
  const where: string[] = [];
  const params: (string | number)[] = [];
  if (filter.merchantId) {
    where.push("merchant_id = ?");
    params.push(filter.merchantId);
  }
  if (filter.status) {
    where.push("status = ?");
    params.push(filter.status);
  }
  // A payout lives at its merchant's home: each place's newest page, merged by time (each place's
  // own order kept; rowid, the tie-break, only orders rows of one database).
  const pages = await Promise.all(
    placementOf(env)
      .each()
      .map(async ({ db }) => {
        const rows = await db
          .prepare(
            `${PAYOUT_SELECT}${where.length ? ` WHERE ${where.join(" AND ")}` : ""} ORDER BY created_at DESC, rowid DESC LIMIT ?`,
          )
          .bind(...params, filter.limit)
          .all<PayoutRow>();
        return rows.results;
      }),
  );
  return mergeSorted(
    pages,
    newestFirst((p: PayoutRow) => p.createdAt),
    filter.limit,
  );
}
