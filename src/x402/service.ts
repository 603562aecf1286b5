import type { Env, X402Settings } from "../env";
import { settingsOf } from "../env";
import { dbOf } from "../db/client";
import { executeBatch } from "../db/statements";
import {
  chargeCreationStatements,
  chargeRowStatement,
  chargeView,
  newPendingCharge,
  type ChargeRow,
  type ChargeView,
} from "../charges/service";
import { linkActiveCheck } from "../ledger/movements";
import { guard, guardReasonOf, sqlStatement, type SqlStatement } from "../db/statements";
import { canonicalJson } from "../lib/canonical-json";
import { newId, shardOfId } from "../lib/ids";
import { dbOfShard } from "../db/shards";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { isAddressEqual } from "viem";
import { authorizationUsed } from "../chain/client";
import { facilitatorOf, type Facilitator } from "./facilitator";
import { settlerOf } from "./settler.do";
import { decodePaymentHeader, type DecodedPayment } from "./payload";
import { ensureReceivingAddress, receivingAddressStatement, type ReceivingOwner, type ReceivingRow } from "./receiving";
import { caip2, termsFor, type Terms } from "./terms";
import { CLOCK_SKEW_SECONDS, MIN_REMAINING_SECONDS, verifyOffline, verifyPayment } from "./verify";
import { credit, release, reopenReleased } from "./settlement";
import { blocklistStatement } from "../kyt/screening";

/** Outcomes of an x402 request; routes.ts maps each to a response. */
export type X402Outcome =
  | { kind: "terms"; terms: Terms }
  | { kind: "already_paid"; charge: ChargeView }
  | { kind: "settled"; settlementId: string; chargeId: string; transaction: string; payer: string }
  | { kind: "pending"; settlementId: string; chargeId: string; transaction: string | null; payer: string }
  | { kind: "invalid"; reason: string; terms: Terms }
  | { kind: "settle_failed"; reason: string; terms: Terms; payer: string }
  /** The chain or the remote facilitator could not be asked before anything was reserved: nothing happened, the same payment may be sent again. */
  | { kind: "unavailable"; error: "chain_unavailable" | "facilitator_unavailable"; reason: string }
  | { kind: "charge_not_found" };

interface PaymentRow {
  id: string;
  chargeId: string;
  payTo: string | null;
  status: string;
  txHash: string | null;
  payer: string;
  /** The stored authorization and signature (read for a payment found by its identifier). */
  payload?: string;
  validBefore?: number;
}

/** What is being paid: a stored charge, or a charge born from a checkout link with this payment. */
export type X402Target =
  | { kind: "charge"; charge: ChargeRow }
  | {
      kind: "checkout";
      link: { id: string; merchantId: string; amountMinor: number; description: string; externalId: string | null };
      merchantName: string;
    };

/** A target as a request names it: a stored charge by id is read with the payment's own lookups, in one round trip. */
export type X402TargetRef = X402Target | { kind: "charge_id"; chargeId: string };

const targetAmount = (t: X402Target) => (t.kind === "charge" ? t.charge.amountMinor : t.link.amountMinor);
const targetDescription = (t: X402Target) =>
  t.kind === "charge" ? (t.charge.description ?? `Charge ${t.charge.id}`) : t.link.description;

/** Whose receiving address an authorization for this target pays: the charge's own, or the link's. */
const ownerOf = (t: X402Target): ReceivingOwner =>
  t.kind === "charge"
    ? { kind: "charge", id: t.charge.id, merchantId: t.charge.merchantId }
    : { kind: "checkout_link", id: t.link.id, merchantId: t.link.merchantId };

/**
 * The ledger shard an x402 payment of this target lives in, with the charge it pays: a stored
 * charge's own (its id carries it), and for a checkout link the link's, where the charge it makes
 * is born. Its reservation, claim, credit and status all live there; the receiving address and the
 * blocklist stay in control (DB).
 */
export const shardOfTarget = (ref: X402TargetRef): number =>
  shardOfId(ref.kind === "charge_id" ? ref.chargeId : ref.kind === "charge" ? ref.charge.id : ref.link.id);

/** The terms of a target: its amount, to its own receiving address (assigned on first use). */
export async function termsForTarget(
  env: Env,
  x: X402Settings,
  target: X402Target,
  resource: string,
  known?: ReceivingRow | null,
): Promise<Terms> {
  const payTo = await ensureReceivingAddress(env, x, ownerOf(target), known);
  return termsFor(x, resource, targetAmount(target), targetDescription(target), payTo);
}

const PAYMENT_SELECT =
  "SELECT id, charge_id AS chargeId, pay_to AS payTo, status, tx_hash AS txHash, payer FROM x402_payments";

/** The payment this payer made earlier with the same v2 payment identifier (a retry of one purchase). */
const identifiedStatement = (db: D1Database, payment: DecodedPayment) =>
  db
    .prepare(
      `SELECT id, charge_id AS chargeId, pay_to AS payTo, status, tx_hash AS txHash, payer, payload, valid_before AS validBefore
     FROM x402_payments WHERE payer = ? AND payment_identifier = ?`,
    )
    .bind(payment.authorization.from.toLowerCase(), payment.paymentIdentifier);

/** What an earlier payment of this purchase answers now: its settlement, or that it is still being settled. */
const outcomeOfEarlier = (p: PaymentRow, payer: string): X402Outcome =>
  p.status === "settled"
    ? { kind: "settled", settlementId: p.id, chargeId: p.chargeId, transaction: p.txHash ?? "", payer }
    : { kind: "pending", settlementId: p.id, chargeId: p.chargeId, transaction: p.txHash, payer };

const paymentStatement = (db: D1Database, x: X402Settings, payment: DecodedPayment) =>
  db
    .prepare(`${PAYMENT_SELECT} WHERE network = ? AND asset = ? AND payer = ? AND nonce = ?`)
    .bind(
      x.network,
      x.asset.toLowerCase(),
      payment.authorization.from.toLowerCase(),
      payment.authorization.nonce.toLowerCase(),
    );

async function findPayment(db: D1Database, x: X402Settings, payment: DecodedPayment): Promise<PaymentRow | null> {
  return paymentStatement(db, x, payment).first<PaymentRow>();
}

/**
 * Everything read before the checks, in one round trip per database: the charge when the target
 * names it by id (null when there is none), an earlier payment with this authorization and one
 * with its payment identifier (all three in the target's shard), the target's receiving address
 * and whether the payer is on the operators' blocklist (both in control). With one shard, or a
 * target in shard 0, that is one batch, as it always was. A payment that did not decode reads the
 * charge and its address alone.
 */
async function lookUp(env: Env, x: X402Settings, ref: X402TargetRef, payment: DecodedPayment | null) {
  const ownerId = ref.kind === "charge_id" ? ref.chargeId : ref.kind === "charge" ? ref.charge.id : ref.link.id;
  const shard = shardOfTarget(ref);
  const db = dbOfShard(env, shard);
  const inShard = [
    ...(ref.kind === "charge_id" ? [chargeRowStatement(db, ref.chargeId)] : []),
    ...(payment ? [paymentStatement(db, x, payment)] : []),
    ...(payment?.paymentIdentifier ? [identifiedStatement(db, payment)] : []),
  ];
  const inControl = [
    receivingAddressStatement(env.DB, ownerId),
    ...(payment ? [blocklistStatement(env.DB, payment.authorization.from)] : []),
  ];
  let shardResults: D1Result<Record<string, unknown>>[];
  let controlResults: D1Result<Record<string, unknown>>[];
  if (shard === 0) {
    const all = await env.DB.batch<Record<string, unknown>>([...inShard, ...inControl]);
    shardResults = all.slice(0, inShard.length);
    controlResults = all.slice(inShard.length);
  } else {
    [shardResults, controlResults] = await Promise.all([
      inShard.length > 0 ? db.batch<Record<string, unknown>>(inShard) : Promise.resolve([]),
      env.DB.batch<Record<string, unknown>>(inControl),
    ]);
  }
  const [charge, earlier, identified] = ref.kind === "charge_id" ? shardResults : [undefined, ...shardResults];
  const [receiving, listed] = controlResults;
  const target: X402Target | null =
    ref.kind !== "charge_id"
      ? ref
      : charge?.results[0]
        ? { kind: "charge", charge: charge.results[0] as ChargeRow }
        : null;
  return {
    target,
    receiving: (receiving?.results[0] as ReceivingRow | undefined) ?? null,
    earlier: (earlier?.results[0] as PaymentRow | undefined) ?? null,
    identified: (identified?.results[0] as PaymentRow | undefined) ?? null,
    onBlocklist: (listed?.results.length ?? 0) > 0,
  };
}

/**
 * Was an earlier payment with this authorization made for what is being paid now? It pays the
 * address it signs, so it is this target's when it pays this target's receiving address (a replay
 * then answers with its own result); anything else is another charge's or link's payment, and
 * nothing of it is shown here.
 */
function sameTarget(earlier: PaymentRow, target: X402Target, terms: Terms): boolean {
  if (earlier.payTo) return isAddressEqual(earlier.payTo as `0x${string}`, terms.payTo);
  // A row from before receiving addresses paid the settlement address: only its own charge knows it.
  return target.kind === "charge" && earlier.chargeId === target.charge.id;
}

/**
 * A failed payment's stored authorization as a payment to send again, while it still has the time
 * to settle; null once it cannot. (The remote facilitator gets it in the shape of its version.)
 */
function storedPayment(x: X402Settings, row: PaymentRow, terms: Terms, nowSeconds: number): DecodedPayment | null {
  if (!row.payload || (row.validBefore ?? 0) < nowSeconds + MIN_REMAINING_SECONDS + CLOCK_SKEW_SECONDS) return null;
  const { authorization, signature, version } = JSON.parse(row.payload) as {
    authorization: DecodedPayment["authorization"];
    signature: `0x${string}`;
    version: 1 | 2;
  };
  const payload = { signature, authorization };
  return {
    version,
    scheme: "exact",
    network: version === 1 ? x.network : caip2(x.chainId),
    accepted:
      version === 1
        ? null
        : { asset: x.asset.toLowerCase(), payTo: terms.payTo.toLowerCase(), amount: authorization.value },
    authorization,
    signature,
    paymentIdentifier: null,
    raw:
      version === 1
        ? { x402Version: 1, scheme: "exact", network: x.network, payload }
        : { x402Version: 2, accepted: terms.v2, payload },
  };
}

/**
 * Pays a charge or a checkout link with an x402 payment header, exactly once:
 *   1. decode and verify (terms, window, signature, KYT; then the facilitator's part: nonce and
 *      balance on chain, and for ours the transfer's own dry run);
 *   2. reserve (network, asset, payer, nonce) and claim the charge in one batch,
 *      before the facilitator is called: a racing payment finds the claim, a
 *      replayed authorization finds the reservation;
 *   3. settle; credit the merchant in one ledger batch guarded by the claim.
 * An unknown settlement outcome keeps the claim and is reconciled later. A payment carrying a v2
 * payment identifier this payer already paid with (a retry of the same purchase, with a new
 * authorization) gets that payment's outcome once its signature proves the payer: nothing more is
 * settled or charged.
 */
export async function payWithX402(
  env: Env,
  ref: X402TargetRef,
  resource: string,
  header: string,
  facilitator?: Facilitator,
): Promise<X402Outcome> {
  const x = settingsOf(env).x402;
  if (!x) throw new Error("x402 is not configured");
  // An id naming a shard this deployment does not run names no charge.
  if (shardOfTarget(ref) >= settingsOf(env).ledgerShards) return { kind: "charge_not_found" };
  let payment = decodePaymentHeader(header);
  const found = await lookUp(env, x, ref, payment);
  const { target, receiving, identified, onBlocklist } = found;
  let earlier = found.earlier;
  if (!target) return { kind: "charge_not_found" };
  const terms = await termsForTarget(env, x, target, resource, receiving);
  if (!payment) return { kind: "invalid", reason: "invalid_payload", terms };
  const payer = payment.authorization.from.toLowerCase();

  if (earlier && earlier.status !== "failed") {
    if (!sameTarget(earlier, target, terms))
      return { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used", terms };
    return outcomeOfEarlier(earlier, payer);
  }
  const nowSeconds = Math.floor(Date.now() / 1000);
  // Only the payer's own signature may learn (and reuse) what its identifier paid: without it the
  // payment goes on as any other, so the answer tells nothing of whether the identifier was used. The
  // signature is checked whenever an identifier is sent, used or not, so neither does the time taken.
  const sent = payment;
  const proof = payment.paymentIdentifier !== null ? await verifyOffline(x, terms, payment, nowSeconds) : undefined;
  let retryOfReleased: PaymentRow | null = null;
  if (identified && identified.id !== earlier?.id && proof?.isValid) {
    // One identifier is one purchase: the same id for something else is refused, never answered with another's outcome.
    if (!sameTarget(identified, target, terms)) return { kind: "invalid", reason: "invalid_payload", terms };
    if (identified.status !== "failed") return outcomeOfEarlier(identified, payer);
    // The purchase's earlier attempt failed, but its authorization can still be used by whoever holds
    // it: that one is settled again instead of this new one, so one purchase never has two live
    // authorizations that could both pay.
    const stored = storedPayment(x, identified, terms, nowSeconds);
    if (stored) {
      payment = { ...stored, paymentIdentifier: payment.paymentIdentifier };
      earlier = identified;
      retryOfReleased = identified;
    }
  }

  if (target.kind === "charge" && target.charge.status === "paid") {
    // Paid by something else: no new payment is taken; the charge answers with itself.
    return { kind: "already_paid", charge: chargeView(target.charge) };
  }
  // The proof above already checked the payment as sent; a stored one standing in for it is checked afresh.
  // A facilitator whose verification runs the transfer proves the signature there, so it is not recovered twice.
  const chosen = facilitator ?? facilitatorOf(env, x);
  const verdict = await verifyPayment(
    x,
    terms,
    payment,
    nowSeconds,
    onBlocklist,
    payment === sent ? proof : undefined,
    chosen.checksSignature ? "left_to_chain" : "recover",
  );
  if (!verdict.isValid) return { kind: "invalid", reason: verdict.invalidReason, terms };
  const remoteVerdict = await chosen.verify(payment, terms);
  if (!remoteVerdict.isValid) {
    if ("unavailable" in remoteVerdict)
      return { kind: "unavailable", error: remoteVerdict.unavailable, reason: remoteVerdict.reason };
    // The released authorization this retry stands for was used on chain since (someone submitted it):
    // the purchase may be paid, so it is taken back for its charge and left to the chain, not refused.
    if (retryOfReleased && remoteVerdict.invalidReason === "invalid_exact_evm_nonce_already_used") {
      if (await reopenReleased(env, retryOfReleased.id, retryOfReleased.chargeId)) {
        await watchSoon(env, retryOfReleased.id);
        return outcomeOfEarlier({ ...retryOfReleased, status: "unknown" }, payer);
      }
    }
    return { kind: "invalid", reason: remoteVerdict.invalidReason, terms };
  }

  const reserved = await reserve(env, x, target, terms, payment, earlier);
  if (reserved.kind !== "reserved")
    return reserved.kind === "outcome" ? reserved.outcome : { kind: "invalid", reason: reserved.reason, terms };

  const settled = await chosen.settle(payment, terms);
  const { paymentId, charge } = reserved;
  const pending = (transaction: `0x${string}` | null, reason: string): Promise<X402Outcome> =>
    leaveToReconciliation(env, paymentId, transaction, reason).then(() => ({
      kind: "pending",
      settlementId: paymentId,
      chargeId: charge.id,
      transaction,
      payer,
    }));
  if (settled.kind === "settled") {
    try {
      await credit(env, x, charge, paymentId, payer, settled.transaction);
    } catch (error) {
      // The money moved: the payer must not be told otherwise, and reconciliation credits it from the chain.
      log.error("x402_credit", { paymentId, error });
      return pending(settled.transaction, "credit_failed");
    }
    return { kind: "settled", settlementId: paymentId, chargeId: charge.id, transaction: settled.transaction, payer };
  }
  if (settled.kind === "failed") {
    // A settlement reported failed can still have paid: someone else may have submitted the
    // authorization first (the funds still go to the signed `to`), or a facilitator may have
    // broadcast before failing. Only an authorization the chain says is unused is released.
    const used = await authorizationUsed(x, payer, payment.authorization.nonce).catch(() => null);
    if (used === false) {
      await release(env, paymentId, charge.id, settled.reason, nowIso());
      return { kind: "settle_failed", reason: settled.reason, terms, payer };
    }
    return pending(null, `${settled.reason}; ${used ? "authorization used on chain" : "chain unreadable"}`);
  }
  return pending(settled.transaction, settled.reason);
}

/**
 * Marks a settlement whose outcome the chain must decide (kept claimed, with the transaction if one
 * is known) and has the settler watch it, so an alarm reconciles it soon.
 */
async function leaveToReconciliation(
  env: Env,
  paymentId: string,
  transaction: `0x${string}` | null,
  reason: string,
): Promise<void> {
  // The payment lives in its charge's shard, which its id names.
  await dbOfShard(env, shardOfId(paymentId))
    .prepare(
      "UPDATE x402_payments SET status = 'unknown', tx_hash = COALESCE(?, tx_hash), error = ?, updated_at = ? WHERE id = ? AND status = 'settling'",
    )
    .bind(transaction, reason.slice(0, 300), nowIso(), paymentId)
    .run();
  await watchSoon(env, paymentId);
}

/** Has the settler's alarm reconcile a payment soon; the minute cron reconciles whatever no alarm watches. */
async function watchSoon(env: Env, paymentId: string): Promise<void> {
  try {
    await settlerOf(env).watch(paymentId);
  } catch (error) {
    log.warn("x402_watch", { paymentId, error });
  }
}

type Reservation =
  | { kind: "reserved"; paymentId: string; charge: ChargeRow }
  | { kind: "outcome"; outcome: X402Outcome }
  | { kind: "refused"; reason: string };

async function reserve(
  env: Env,
  x: X402Settings,
  target: X402Target,
  terms: Terms,
  payment: DecodedPayment,
  earlier: PaymentRow | null,
): Promise<Reservation> {
  const a = payment.authorization;
  const at = nowIso();
  // Everything the reservation guards and writes is in the target's shard, and the payment's id carries it.
  const shard = shardOfTarget(target);
  const db = dbOfShard(env, shard);
  const paymentId = earlier?.id ?? newId("x402Payment", shard);
  const charge =
    target.kind === "charge"
      ? target.charge
      : newPendingCharge(
          target.link.merchantId,
          {
            amountMinor: target.link.amountMinor,
            description: target.link.description,
            externalId: target.link.externalId,
            checkoutLinkId: target.link.id,
            x402Claim: paymentId,
          },
          at,
          shard,
        );
  const payload = canonicalJson({ authorization: a, signature: payment.signature, version: payment.version });
  const statements: SqlStatement[] = [];
  if (target.kind === "charge") {
    statements.push(
      guard(
        "charge_unavailable",
        "EXISTS (SELECT 1 FROM charges WHERE id = ? AND status = 'pending' AND x402_claim IS NULL)",
        charge.id,
      ),
    );
    // A charge born from a checkout link is paid only while the link is active, whatever pays it.
    if (charge.checkoutLinkId) statements.push(guard(...linkActiveCheck(charge.checkoutLinkId)));
  } else {
    statements.push(guard(...linkActiveCheck(target.link.id)));
    statements.push(...chargeCreationStatements(charge, target.merchantName));
  }
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
        "UPDATE x402_payments SET status = 'settling', charge_id = ?, pay_to = ?, payment_identifier = ?, error = NULL, updated_at = ? WHERE id = ?",
        charge.id,
        terms.payTo.toLowerCase(),
        payment.paymentIdentifier,
        at,
        earlier.id,
      ),
    );
  } else {
    statements.push(
      sqlStatement(
        `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, pay_to, value, valid_before, payload, payment_identifier, status, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'settling', ?, ?)`,
        paymentId,
        x.network,
        x.asset.toLowerCase(),
        a.from.toLowerCase(),
        a.nonce.toLowerCase(),
        charge.id,
        terms.payTo.toLowerCase(),
        a.value,
        Number(a.validBefore),
        payload,
        payment.paymentIdentifier,
        at,
        at,
      ),
    );
  }
  if (target.kind === "charge")
    statements.push(
      sqlStatement(
        "UPDATE charges SET x402_claim = ? WHERE id = ? AND status = 'pending' AND x402_claim IS NULL",
        paymentId,
        charge.id,
      ),
    );
  try {
    await executeBatch(db, statements);
    return { kind: "reserved", paymentId, charge };
  } catch (error) {
    const reason = guardReasonOf(error);
    // The same authorization raced itself: the other request holds the reservation (or is about to).
    // Its `to` is this target's address, so that request paid this same charge or link; anything
    // else would be another's payment, which is refused without naming it.
    const sameAuthorization = await findPayment(db, x, payment);
    if (sameAuthorization && sameAuthorization.status !== "failed") {
      if (!sameTarget(sameAuthorization, target, terms))
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
      const current = await db
        .prepare("SELECT status FROM charges WHERE id = ?")
        .bind(charge.id)
        .first<{ status: string }>();
      if (current?.status === "paid") {
        const paid = await dbOf(db).query.charges.findFirst({ where: (c, { eq }) => eq(c.id, charge.id) });
        if (paid) return { kind: "outcome", outcome: { kind: "already_paid", charge: chargeView(paid) } };
      }
      return { kind: "refused", reason: "charge_settlement_in_progress" };
    }
    if (reason) return { kind: "refused", reason };
    throw error;
  }
}
