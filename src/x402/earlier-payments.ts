import { isAddressEqual } from "viem";
import type { X402Settings } from "../config/env";
import type { X402Outcome } from "./outcome";
import type { DecodedPayment } from "./payload";
import type { X402Target } from "./target";
import { caip2, type Terms } from "./terms";
import { CLOCK_SKEW_SECONDS, MIN_REMAINING_SECONDS } from "./verify";

/** A stored x402 payment as the request path reads it, to answer a replay or a retry of one purchase. */
export interface PaymentRow {
  id: string;
  chargeId: string;
  payTo: string | null;
  status: string;
  txHash: string | null;
  payer: string;
  /** Token base units the authorization moves, as a decimal string. */
  value: string;
  /** The stored authorization and signature (canonical JSON). */
  payload: string;
  validBefore?: number;
}

const PAYMENT_SELECT =
  "SELECT id, charge_id AS chargeId, pay_to AS payTo, status, tx_hash AS txHash, payer, value, payload FROM x402_payments";

/** The payment this payer made earlier with the same v2 payment identifier (a retry of one purchase). */
export const identifiedStatement = (db: D1Database, payment: DecodedPayment) =>
  db
    .prepare(
      `SELECT id, charge_id AS chargeId, pay_to AS payTo, status, tx_hash AS txHash, payer, value, payload, valid_before AS validBefore
     FROM x402_payments WHERE payer = ? AND payment_identifier = ?`,
    )
    .bind(payment.authorization.from.toLowerCase(), payment.paymentIdentifier);

/** The payment made earlier with this very authorization (network, asset, payer, nonce). */
export const paymentStatement = (db: D1Database, x: X402Settings, payment: DecodedPayment) =>
  db
    .prepare(`${PAYMENT_SELECT} WHERE network = ? AND asset = ? AND payer = ? AND nonce = ?`)
    .bind(
      x.network,
      x.asset.toLowerCase(),
      payment.authorization.from.toLowerCase(),
      payment.authorization.nonce.toLowerCase(),
    );

export async function findPayment(
  db: D1Database,
  x: X402Settings,
  payment: DecodedPayment,
): Promise<PaymentRow | null> {
  return paymentStatement(db, x, payment).first<PaymentRow>();
}

/** What an earlier payment of this purchase answers now: its settlement, or that it is still being settled. */
export const outcomeOfEarlier = (p: PaymentRow, payer: string): X402Outcome =>
  p.status === "settled"
    ? { kind: "settled", settlementId: p.id, chargeId: p.chargeId, transaction: p.txHash ?? "", payer }
    : { kind: "pending", settlementId: p.id, chargeId: p.chargeId, transaction: p.txHash, payer };

/**
 * Was an earlier payment with this authorization made for what is being paid now? It pays the
 * address it signs, so it is this target's when it pays this target's receiving address (a replay
 * then answers with its own result); anything else is another charge's or link's payment, and
 * nothing of it is shown here.
 */
export function sameTarget(earlier: PaymentRow, target: X402Target, terms: Terms): boolean {
  // A merchant's own route is paid at its one address whatever it sells: the price must be the same too.
  if (BigInt(earlier.value) !== terms.value) return false;
  if (earlier.payTo) return isAddressEqual(earlier.payTo as `0x${string}`, terms.payTo);
  // A row from before receiving addresses paid the settlement address: only its own charge knows it.
  return target.kind === "charge" && earlier.chargeId === target.charge.id;
}

/**
 * Is `sent` the very authorization the earlier payment stored: every signed field and the signature
 * the same? Only then does a request answer that payment's outcome. Two signatures can share a nonce
 * (a payer may sign one nonce for two prices, or anyone may send a stored one altered): the one that
 * did not settle must not be told it did.
 */
export function sameAuthorization(earlier: PaymentRow, sent: DecodedPayment): boolean {
  const stored = JSON.parse(earlier.payload) as { authorization: DecodedPayment["authorization"]; signature: string };
  const [a, b] = [stored.authorization, sent.authorization];
  const sameText = (p: string, q: string) => p.toLowerCase() === q.toLowerCase();
  return (
    sameText(a.from, b.from) &&
    sameText(a.to, b.to) &&
    sameText(a.nonce, b.nonce) &&
    BigInt(a.value) === BigInt(b.value) &&
    BigInt(a.validAfter) === BigInt(b.validAfter) &&
    BigInt(a.validBefore) === BigInt(b.validBefore) &&
    sameText(stored.signature, sent.signature)
  );
}

/** An earlier payment with this authorization that this request may answer with: the same target, the same signed payment. */
export const replayOf = (earlier: PaymentRow, target: X402Target, terms: Terms, sent: DecodedPayment) =>
  sameTarget(earlier, target, terms) && sameAuthorization(earlier, sent);

/**
 * A failed payment's stored authorization as a payment to send again, while it still has the time
 * to settle; null once it cannot. (The remote facilitator gets it in the shape of its version.)
 */
export function storedPayment(
  x: X402Settings,
  row: PaymentRow,
  terms: Terms,
  nowSeconds: number,
): DecodedPayment | null {
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
