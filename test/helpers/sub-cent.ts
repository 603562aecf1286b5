import { env } from "cloudflare:workers";
import { toHex } from "viem";
import { expect } from "vitest";
import { chargeCreationStatements, newPendingCharge } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { executeBatch, sqlStatement } from "../../src/db/statements";
import { x402PaymentPlan } from "../../src/ledger/movements";
import { placementOf } from "../../src/ledger/place";
import { newId } from "../../src/lib/ids";

const randomHex32 = () => toHex(crypto.getRandomValues(new Uint8Array(32)));

/**
 * A merchant's charge of `baseUnits` (less than a cent is fine) paid by x402, as the facilitator
 * settles one: the pending charge claimed by its payment, then credited through the ledger's x402
 * plan. No API creates a charge below a cent; only a facilitator's payment does. `payer` and
 * `transaction` default to made-up ones; the treasury's tests pass a real transfer's.
 */
export async function paidBelowACent(
  merchantId: string,
  baseUnits: bigint,
  onChain: { payer?: string; transaction?: string } = {},
): Promise<string> {
  const x = settingsOf(env).x402!;
  const at = await placementOf(env).ofMerchant(merchantId);
  const paymentId = newId("x402Payment", at);
  const charge = newPendingCharge(at, merchantId, { amountBaseUnits: baseUnits, x402Claim: paymentId });
  const payer = (onChain.payer ?? randomHex32().slice(0, 42)).toLowerCase();
  const now = new Date().toISOString();
  await executeBatch(at.db, [
    ...chargeCreationStatements(charge, "Below a cent"),
    sqlStatement(
      `INSERT INTO x402_payments (id, network, asset, payer, nonce, charge_id, pay_to, value, valid_before, payload, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{}', 'settling', ?, ?)`,
      paymentId,
      x.network,
      x.asset.toLowerCase(),
      payer,
      randomHex32(),
      charge.id,
      x.payTo.toLowerCase(),
      baseUnits.toString(),
      Math.floor(Date.now() / 1000) + 3600,
      now,
      now,
    ),
  ]);
  const paid = await at.commit(
    x402PaymentPlan({
      charge,
      paymentId,
      network: x.network,
      payer,
      transaction: onChain.transaction ?? randomHex32(),
      paidAt: now,
    }),
  );
  expect(paid.kind).toBe("committed");
  return charge.id;
}
