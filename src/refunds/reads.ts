import { type SqlStatement, sqlStatement } from "../db/statements";

/**
 * The merchant's refund once it `succeeded`, as a receipt shows it (id, chargeId, merchantId,
 * agentId, amountMinor, currency, method, destination, txHash); no row while pending, failed,
 * unknown or another merchant's.
 */
export const succeededRefundRow = (refundId: string, merchantId: string): SqlStatement =>
  sqlStatement(
    `SELECT id, charge_id AS chargeId, merchant_id AS merchantId, agent_id AS agentId,
       amount_minor AS amountMinor, currency, method, destination, tx_hash AS txHash
       FROM refunds WHERE id = ? AND merchant_id = ? AND status = 'succeeded'`,
    refundId,
    merchantId,
  );
