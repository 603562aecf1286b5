import { type ChargeRow, chargeCreationStatements, chargeView, getCharge, newPendingCharge } from "../charges/service";
import { claimableByX402, claimForX402, retryableFacilitated } from "../charges/statements";
import type { X402Settings } from "../config/env";
import { executeBatch, guard, guardReasonOf, type SqlStatement, sqlStatement } from "../db/statements";
import { linkActiveCheck } from "../ledger/movements";
import type { Place } from "../ledger/place";
import { canonicalJson } from "../lib/canonical-json";
import { newId } from "../lib/ids";
import { nowIso } from "../lib/time";
import {
  findPayment,
  identifiedStatement,
  outcomeOfEarlier,
  type PaymentRow,
  replayOf,
  sameTarget,
} from "./earlier-payments";
import type { X402Outcome } from "./outcome";
import type { DecodedPayment } from "./payload";
import type { FacilitatedTarget, X402Target } from "./target";
import type { Terms } from "./terms";

export type Reservation =
  | { kind: "reserved"; paymentId: string; charge: ChargeRow }
  | { kind: "outcome"; outcome: X402Outcome }
  | { kind: "refused"; reason: string };

/**
 * Reserves (network, asset, payer, nonce) and claims the charge in one batch, before the
 * facilitator is called: a racing payment finds the claim, a replayed authorization finds the
 * reservation. A checkout link's charge is born in the same batch, already claimed. Everything the
 * reservation guards and writes is where the target lives (`where`), and the payment's id carries it.
 */
export async function reserve(
  x: X402Settings,
  where: Place,
  target: X402Target,
  terms: Terms,
  payment: DecodedPayment,
  earlier: PaymentRow | null,
  /** The head at which the chain showed the authorization unused: its use is searched for from there. */
  seenBlock: number | null = null,
): Promise<Reservation> {
  const { paymentId, charge, statements } = await reservationOf(x, where, target, terms, payment, earlier, seenBlock);
  try {
    await executeBatch(where.db, statements);
    return { kind: "reserved", paymentId, charge };
  } catch (error) {
    const answer = await answerToRefusal(where.db, x, target, terms, payment, charge.id, guardReasonOf(error));
    if (answer) return answer;
    throw error;
  }
}

/** A reservation's id, the charge it claims, and the statements that write it, as one batch. */
async function reservationOf(
  x: X402Settings,
  where: Place,
  target: X402Target,
  terms: Terms,
  payment: DecodedPayment,
  earlier: PaymentRow | null,
  seenBlock: number | null,
): Promise<{ paymentId: string; charge: ChargeRow; statements: SqlStatement[] }> {
  const at = nowIso();
  const paymentId = earlier?.id ?? newId("x402Payment", where);
  const retried = await facilitatedChargeOf(where.db, target, earlier);
  const charge = retried ?? chargeToClaim(target, paymentId, at, where);
  const statements: SqlStatement[] = [
    ...(retried ? [guard(...retryableFacilitated(charge.id))] : chargeGuards(target, charge)),
    ...paymentStatements(x, terms, payment, earlier, paymentId, charge.id, at, seenBlock),
  ];
  if (target.kind === "charge" || retried) statements.push(claimForX402(charge.id, paymentId));
  return { paymentId, charge, statements };
}

/**
 * A merchant's route paid with an authorization nothing here has seen (the common case), reserved
 * without reading first: `guards` (the payer's screening) and the unique authorization index hold in
 * the reservation's own transaction what the lookups would have read. Null when the batch is refused
 * or fails for any reason: nothing was written, and the caller takes the path that reads first,
 * which explains the refusal (an earlier payment, a screened payer) as it always has.
 */
export async function reserveFresh(
  x: X402Settings,
  where: Place,
  target: FacilitatedTarget,
  terms: Terms,
  payment: DecodedPayment,
  seenBlock: number | null,
  guards: SqlStatement[],
): Promise<Extract<Reservation, { kind: "reserved" }> | null> {
  // The very reservation `reserve` writes for a payment with no earlier attempt, behind the guards.
  const { paymentId, charge, statements } = await reservationOf(x, where, target, terms, payment, null, seenBlock);
  try {
    await executeBatch(where.db, [...guards, ...statements]);
    return { kind: "reserved", paymentId, charge };
  } catch {
    return null;
  }
}

/**
 * The charge a failed facilitated settlement of this same authorization made, which its retry takes
 * up again instead of making another: one authorization is one charge, and that charge stays closed
 * to every other payment. Undefined for anything else.
 */
async function facilitatedChargeOf(
  db: D1Database,
  target: X402Target,
  earlier: PaymentRow | null,
): Promise<ChargeRow | undefined> {
  if (target.kind !== "facilitated" || !earlier) return undefined;
  const charge = await getCharge(db, earlier.chargeId);
  return charge?.facilitated === 1 && charge.merchantId === target.merchantId ? charge : undefined;
}

/** The charge a reservation claims: the stored one, or the one a checkout link's payment gives birth to. */
function chargeToClaim(target: X402Target, paymentId: string, at: string, where: Place): ChargeRow {
  if (target.kind === "charge") return target.charge;
  if (target.kind === "facilitated")
    return newPendingCharge(
      where,
      target.merchantId,
      {
        // Exact: a route's price may be below a cent, and the ledger holds base units.
        amountBaseUnits: target.value,
        description: target.description,
        resource: target.resource,
        x402Claim: paymentId,
        facilitated: true,
      },
      at,
    );
  return newPendingCharge(
    where,
    target.link.merchantId,
    {
      amountMinor: target.link.amountMinor,
      description: target.link.description,
      externalId: target.link.externalId,
      checkoutLinkId: target.link.id,
      x402Claim: paymentId,
    },
    at,
  );
}

/** The guards on what is being paid: a stored charge still pending and unclaimed, a link still active. */
function chargeGuards(target: X402Target, charge: ChargeRow): SqlStatement[] {
  if (target.kind === "facilitated") return chargeCreationStatements(charge, target.merchantName);
  if (target.kind !== "charge")
    return [guard(...linkActiveCheck(target.link.id)), ...chargeCreationStatements(charge, target.merchantName)];
  const statements = [guard(...claimableByX402(charge.id))];
  // A charge born from a checkout link is paid only while the link is active, whatever pays it.
  if (charge.checkoutLinkId) statements.push(guard(...linkActiveCheck(charge.checkoutLinkId)));
  return statements;
}

/** The payment's own row, written as settling: a new one, or a failed attempt with this authorization taken up again. */
function paymentStatements(
  x: X402Settings,
  terms: Terms,
  payment: DecodedPayment,
  earlier: PaymentRow | null,
  paymentId: string,
  chargeId: string,
  at: string,
  seenBlock: number | null,
): SqlStatement[] {
  const a = payment.authorization;
  const payload = canonicalJson({ authorization: a, signature: payment.signature, version: payment.version });
  const statements: SqlStatement[] = [];
  if (payment.paymentIdentifier) {
    // A failed payment leaves its identifier to the next attempt at the same purchase.
    statements.push(
      sqlStatement(
        "UPDATE x402_payments SET payment_identifier = NULL WHERE payer = ? AND payment_identifier = ? AND status = 'failed'",
        a.from.toLowerCase(),
        payment.paymentIdentifier,
      ),
    );
  }
  if (earlier) {
    // A failed attempt with this authorization may be retried: the nonce was never used.
    statements.push(
      guard(
        "x402_payment_in_use",
        "EXISTS (SELECT 1 FROM x402_payments WHERE id = ? AND status = 'failed')",
        earlier.id,
      ),
    );
    statements.push(
      sqlStatement(
        "UPDATE x402_payments SET status = 'settling', charge_id = ?, pay_to = ?, payment_identifier = ?, error = NULL, seen_block = COALESCE(seen_block, ?), updated_at = ? WHERE id = ?",
        chargeId,
        terms.payTo.toLowerCase(),
        payment.paymentIdentifier,
        seenBlock,
        at,
        earlier.id,
      ),
    );
    return statements;
  }
  statements.push(
    sqlStatement(
      `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, pay_to, value, valid_before, payload, payment_identifier, seen_block, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'settling', ?, ?)`,
      paymentId,
      x.network,
      x.asset.toLowerCase(),
      a.from.toLowerCase(),
      a.nonce.toLowerCase(),
      chargeId,
      terms.payTo.toLowerCase(),
      a.value,
      Number(a.validBefore),
      payload,
      payment.paymentIdentifier,
      seenBlock,
      at,
      at,
    ),
  );
  return statements;
}

/**
 * What a reservation the batch refused answers: the payment that won a race, the charge paid by
 * something else, or the guard's reason. Null when the failure was no guard's (it is thrown on).
 */
async function answerToRefusal(
  db: D1Database,
  x: X402Settings,
  target: X402Target,
  terms: Terms,
  payment: DecodedPayment,
  chargeId: string,
  reason: string | null,
): Promise<Reservation | null> {
  // The same authorization raced itself: the other request holds the reservation (or is about to).
  // Its `to` is this target's address, so that request paid this same charge or link; anything
  // else would be another's payment, which is refused without naming it.
  const sameAuthorization = await findPayment(db, x, payment);
  if (sameAuthorization && sameAuthorization.status !== "failed") {
    if (!replayOf(sameAuthorization, target, terms, payment))
      return { kind: "refused", reason: "invalid_exact_evm_nonce_already_used" };
    return { kind: "outcome", outcome: outcomeOfEarlier(sameAuthorization, sameAuthorization.payer) };
  }
  // The same purchase raced itself with two authorizations: the identifier's unique index let one in.
  const samePurchase = payment.paymentIdentifier ? await identifiedStatement(db, payment).first<PaymentRow>() : null;
  if (samePurchase && samePurchase.status !== "failed") {
    if (!sameTarget(samePurchase, target, terms)) return { kind: "refused", reason: "invalid_payload" };
    return { kind: "outcome", outcome: outcomeOfEarlier(samePurchase, samePurchase.payer) };
  }
  if (reason === "charge_unavailable" && target.kind === "charge") {
    const current = await getCharge(db, chargeId);
    if (current?.status === "paid")
      return { kind: "outcome", outcome: { kind: "already_paid", charge: chargeView(current) } };
    return { kind: "refused", reason: "charge_settlement_in_progress" };
  }
  if (reason) return { kind: "refused", reason };
  return null;
}
