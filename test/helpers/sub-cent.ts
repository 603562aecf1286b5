import { env } from "cloudflare:workers";
import { toHex } from "viem";
import { chargeCreationStatements, newPendingCharge } from "../../src/charges/service";
import { settingsOf } from "../../src/config/env";
import { executeBatch, sqlStatement } from "../../src/db/statements";
import { x402PaymentPlan } from "../../src/ledger/movements";
import { placementOf } from "../../src/ledger/place";
import { postingStatements } from "../../src/ledger/postings";
import { newId } from "../../src/lib/ids";

const randomHex32 = () => toHex(crypto.getRandomValues(new Uint8Array(32)));

/**
 * A merchant's charge of `baseUnits` (less than a cent is fine) paid by x402, as the facilitator
 * settles one: the pending charge claimed by its payment, then credited through the ledger's x402
 * plan. No API creates a charge below a cent; only a facilitator's payment does. `payer` and
 * `transaction` default to made-up ones; the treasury's tests pass a real transfer's.
 */
export async function settledBelowACent(
  merchantId: string,
  baseUnits: bigint,
  onChain: { payer?: string; transaction?: string } = {},
): Promise<{ chargeId: string; transaction: string; results: Record<string, unknown>[][] }> {
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
  const transaction = onChain.transaction ?? randomHex32();
  const paid = await at.commit(
    x402PaymentPlan({ charge, paymentId, network: x.network, payer, transaction, paidAt: now }),
  );
  if (paid.kind !== "committed") throw new Error(`the x402 plan of ${charge.id} was ${paid.kind}`);
  return { chargeId: charge.id, transaction, results: paid.results };
}

/** As settledBelowACent, answering the charge's id. */
export const paidBelowACent = async (
  merchantId: string,
  baseUnits: bigint,
  onChain: { payer?: string; transaction?: string } = {},
): Promise<string> => (await settledBelowACent(merchantId, baseUnits, onChain)).chargeId;

/**
 * A merchant's pending charge of `baseUnits` (below or between cents), open to a wallet. No API
 * creates one (a facilitator's charge is paid by its own payment only): it is written by the charges
 * module's own statements, so the wallet's exact figures can be tested on their own.
 */
export async function pendingBelowACent(merchantId: string, baseUnits: bigint): Promise<string> {
  const at = await placementOf(env).ofMerchant(merchantId);
  const charge = newPendingCharge(at, merchantId, { amountBaseUnits: baseUnits, description: "Below a cent" });
  await executeBatch(at.db, chargeCreationStatements(charge, "Below a cent"));
  return charge.id;
}

/**
 * Credits `baseUnits` to the agent's wallet by a posting from outside (`external:test`), through its
 * home's ledger. The wallet object does not see it: call it before the agent's first payment (or
 * after anything that makes the object read D1 again, a credit through the API).
 */
export async function creditBaseUnits(agentId: string, baseUnits: bigint): Promise<void> {
  const home = await placementOf(env).ofAgent(agentId);
  const result = await home.commit({
    statements: postingStatements(
      newId("payment", home),
      [{ from: "external:test", to: `agent:${agentId}`, amountBaseUnits: baseUnits }],
      new Date().toISOString(),
    ),
    audit: [],
  });
  if (result.kind !== "committed") throw new Error(`the credit of ${agentId} was ${result.kind}`);
}
