import { type GuardCheck, type SqlStatement, sqlStatement } from "../db/statements";
import { merchantLabelOf, merchantNameOf } from "../merchants/statements";

/*
 * The charges table's statements that other folders put in their own: a wallet's reads, a refund's
 * guard and writes, an x402 payment's claim, a receipt's row, the console's figures. A charge lives
 * in its merchant's home, so each runs on the database of the place the charge's id names.
 */

/** A charge's columns (table alias `c`) named as in ChargeRow. */
export const CHARGE_ROW_COLUMNS = `c.id, c.merchant_id AS merchantId, c.agent_id AS agentId, c.amount_minor AS amountMinor,
  c.amount_base_units AS amountBaseUnits, c.currency,
  c.description, c.external_id AS externalId, c.status, c.method, c.reference, c.created_at AS createdAt, c.paid_at AS paidAt,
  c.checkout_link_id AS checkoutLinkId, c.paylink_grant_id AS paylinkGrantId, c.x402_claim AS x402Claim,
  c.refunded_minor AS refundedMinor, c.refunded_base_units AS refundedBaseUnits, c.resource, c.facilitated`;

/** A charge as a ChargeRow with `merchantName` and `merchantCategory`: what a wallet pays. */
export const payableChargeRead = (chargeId: string): SqlStatement =>
  sqlStatement(
    `SELECT ${CHARGE_ROW_COLUMNS}, ${merchantLabelOf("c.merchant_id")} FROM charges c WHERE c.id = ?`,
    chargeId,
  );

/** A charge as a ChargeRow with its merchant's name (`merchantName`, null without one). */
export const chargeWithMerchantName = (chargeId: string): SqlStatement =>
  sqlStatement(
    `SELECT ${CHARGE_ROW_COLUMNS}, ${merchantNameOf("c.merchant_id")} AS merchantName FROM charges c WHERE c.id = ?`,
    chargeId,
  );

/** A charge's status, or null for no such charge. */
export async function chargeStatus(d1: D1Database, chargeId: string): Promise<string | null> {
  const row = await d1.prepare("SELECT status FROM charges WHERE id = ?").bind(chargeId).first<{ status: string }>();
  return row?.status ?? null;
}

/**
 * What the agent (an SQL expression) paid from its wallet for charges of this database since `since`
 * (an SQL expression): wallet and PayLink payments, exact in base units (ten payments of $0.001 are
 * 1 cent), as an SQL expression.
 */
export const paidByAgentSince = (agentId: string, since: string) =>
  `COALESCE((SELECT SUM(amount_base_units) FROM charges
         WHERE agent_id = ${agentId} AND status = 'paid' AND method IN ('ledger', 'paylink') AND paid_at >= ${since}), 0)`;

/** The charge is a paid charge of the merchant: a refund is taken only of one. */
export const chargePaidTo = (chargeId: string, merchantId: string): GuardCheck => [
  "charge_not_paid",
  "EXISTS (SELECT 1 FROM charges WHERE id = ? AND merchant_id = ? AND status = 'paid')",
  chargeId,
  merchantId,
];

/**
 * The charge's refunded sum grows by `baseUnits` (the table's trigger aborts the batch past the
 * charge's amount), its whole cents derived, answering with the sum after it: its cents in the column
 * `answerAs`, its base units (as text) in `answerAs` + `BaseUnits`. D1 binds a number as REAL: cast,
 * or the cents are a fraction for an amount below a cent and the cents trigger refuses it.
 */
export const addRefunded = (chargeId: string, baseUnits: number, answerAs: string): SqlStatement =>
  sqlStatement(
    `UPDATE charges SET refunded_base_units = refunded_base_units + CAST(? AS INTEGER),
       refunded_minor = (refunded_base_units + CAST(? AS INTEGER)) / 10000
     WHERE id = ? RETURNING refunded_minor AS ${answerAs}, CAST(refunded_base_units AS TEXT) AS ${answerAs}BaseUnits`,
    baseUnits,
    baseUnits,
    chargeId,
  );

/** A failed refund's amount (base units) taken off the charge's refunded sum again. */
export const subtractRefunded = (chargeId: string, baseUnits: number): SqlStatement =>
  sqlStatement(
    `UPDATE charges SET refunded_base_units = refunded_base_units - CAST(? AS INTEGER),
       refunded_minor = (refunded_base_units - CAST(? AS INTEGER)) / 10000
     WHERE id = ?`,
    baseUnits,
    baseUnits,
    chargeId,
  );

/**
 * The charge's refunded sum as a batch leaves it, the figure an event or a stored answer is
 * completed with: in the place of `"refundedMinor":<figure>`, its cents followed by the field
 * `refundedBaseUnits` (a decimal string), so one figure states both (the template has no
 * `refundedBaseUnits` of its own).
 */
export const refundedFigure = (chargeId: string): SqlStatement =>
  sqlStatement(
    `SELECT refunded_minor || ',"refundedBaseUnits":"' || refunded_base_units || '"' FROM charges WHERE id = ?`,
    chargeId,
  );

/**
 * The charge is still pending, no x402 payment holds it, and it was not made by a facilitated
 * settlement (which only its own payment pays): one may claim it.
 */
export const claimableByX402 = (chargeId: string): GuardCheck => [
  "charge_unavailable",
  "EXISTS (SELECT 1 FROM charges WHERE id = ? AND status = 'pending' AND x402_claim IS NULL AND facilitated = 0)",
  chargeId,
];

/** A facilitated charge whose settlement failed, still pending and unclaimed: a retry of that same authorization may claim it. */
export const retryableFacilitated = (chargeId: string): GuardCheck => [
  "charge_unavailable",
  "EXISTS (SELECT 1 FROM charges WHERE id = ? AND status = 'pending' AND x402_claim IS NULL AND facilitated = 1)",
  chargeId,
];

/** The x402 payment claims the charge while it is pending and unclaimed: no other payment may take it. */
export const claimForX402 = (chargeId: string, paymentId: string): SqlStatement =>
  sqlStatement(
    "UPDATE charges SET x402_claim = ? WHERE id = ? AND status = 'pending' AND x402_claim IS NULL",
    paymentId,
    chargeId,
  );

/** The payment's claim on the still pending charge ends: it is open to other payments again. */
export const releaseX402Claim = (chargeId: string, paymentId: string): SqlStatement =>
  sqlStatement(
    "UPDATE charges SET x402_claim = NULL WHERE id = ? AND status = 'pending' AND x402_claim = ?",
    chargeId,
    paymentId,
  );

/**
 * The payment claims the pending, unclaimed charge again, when `condition` (an SQL condition over
 * `conditionParams`: the payment was released) holds.
 */
export const reclaimForX402 = (
  chargeId: string,
  paymentId: string,
  condition: string,
  ...conditionParams: SqlStatement["params"]
): SqlStatement =>
  sqlStatement(
    `UPDATE charges SET x402_claim = ? WHERE id = ? AND status = 'pending' AND x402_claim IS NULL AND ${condition}`,
    paymentId,
    chargeId,
    ...conditionParams,
  );

/** The charge is held by the payment, as an SQL condition over two SQL expressions. */
export const chargeClaimedBy = (chargeId: string, paymentId: string) =>
  `EXISTS (SELECT 1 FROM charges WHERE id = ${chargeId} AND x402_claim = ${paymentId})`;

/**
 * A paid charge as its receipt shows it (receipts' PaidChargeRow), or nothing while it is unpaid or
 * unknown; with `merchantId`, nothing for another merchant's.
 */
export const paidChargeRead = (chargeId: string, merchantId?: string): SqlStatement =>
  sqlStatement(
    `SELECT id, merchant_id AS merchantId, agent_id AS agentId, amount_minor AS amountMinor, currency,
       method, reference, paid_at AS paidAt
       FROM charges WHERE id = ? AND status = 'paid'${merchantId === undefined ? "" : " AND merchant_id = ?"}`,
    chargeId,
    ...(merchantId === undefined ? [] : [merchantId]),
  );

/** How many charges were paid since `since`, and their sum (`n`, `cents`). */
export const paidTotalsSince = (since: string): SqlStatement =>
  sqlStatement(
    "SELECT COUNT(*) AS n, COALESCE(SUM(amount_minor), 0) AS cents FROM charges WHERE status = 'paid' AND paid_at >= ?",
    since,
  );

/** The cents paid since `since` by UTC hour (`hour`, `cents`), hours without payments left out. */
export const paidByHourSince = (since: string): SqlStatement =>
  sqlStatement(
    "SELECT CAST(substr(paid_at, 12, 2) AS INTEGER) AS hour, SUM(amount_minor) AS cents FROM charges WHERE status = 'paid' AND paid_at >= ? GROUP BY hour",
    since,
  );

/** How many charges were created since `since` (an SQL expression), as an SQL expression. */
export const chargesCreatedSince = (since: string) => `(SELECT COUNT(*) FROM charges WHERE created_at >= ${since})`;

/** The URL a charge was paid for (a payment to a merchant's own x402 route); null for any other charge. */
export async function chargeResource(d1: D1Database, chargeId: string): Promise<string | null> {
  const row = await d1
    .prepare("SELECT resource FROM charges WHERE id = ?")
    .bind(chargeId)
    .first<{ resource: string | null }>();
  return row?.resource ?? null;
}
