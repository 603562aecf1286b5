import { guards, type SqlStatement, sqlStatement } from "../db/statements";
import { INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { baseUnitsParam, centsIfWhole } from "../lib/money";
import { agentNotFrozenCheck } from "./movements";
import type { CommitPlan } from "./plan";
import { type Account, postingStatements } from "./postings";

/**
 * Where an agent's outbound x402 payments go in its home's ledger: money the service owes the payee
 * through the settlement address's authorization. It belongs to nobody and has no balance row (as
 * `external:payouts:<network>`); a release moves the amount back to the agent.
 */
export const x402OutAccount = (network: string): Account => `external:x402-out:${network}`;

/** The refusal of a plan whose payment is already recorded: its batch landed before. */
export const X402_OUT_RECORDED = "agent_x402_payment_recorded";

/** An agent's payment of someone else's x402 paywall, as signed: what its batch records. */
export interface AgentX402Payment {
  id: string;
  agentId: string;
  resource: string;
  payTo: string;
  /** As the paywall's entry named it. */
  network: string;
  asset: string;
  amountBaseUnits: bigint;
  nonce: string;
  validBefore: number;
  header: { name: string; value: string };
  createdAt: string;
}

/**
 * The payment as one batch in the agent's home: guarded (the agent not frozen, its balance covering
 * the exact amount), the agent debited to the outbound account, the payment row `authorized`, the
 * audit row, and `epilogue` (the keyed request's stored answer). A batch refused writes nothing:
 * the signature in it was never given to anyone.
 */
export function agentX402PaymentPlan(p: AgentX402Payment, epilogue: SqlStatement[]): CommitPlan {
  const amount = baseUnitsParam(p.amountBaseUnits);
  return {
    statements: [
      guards(
        // The sequencer commits a plan again when it cannot tell whether its batch landed: this one did.
        [X402_OUT_RECORDED, "NOT EXISTS (SELECT 1 FROM agent_x402_payments WHERE id = ?)", p.id],
        agentNotFrozenCheck(p.agentId),
        [
          INSUFFICIENT_BALANCE,
          "EXISTS (SELECT 1 FROM agents WHERE id = ? AND balance_base_units >= ?)",
          p.agentId,
          amount,
        ],
      ),
      ...postingStatements(
        p.id,
        [{ from: `agent:${p.agentId}`, to: x402OutAccount(p.network), amountBaseUnits: p.amountBaseUnits }],
        p.createdAt,
      ),
      sqlStatement(
        `INSERT INTO agent_x402_payments (id, agent_id, resource, pay_to, network, asset, amount_base_units, nonce,
           valid_before, header_name, header_value, status, tx_hash, created_at, settled_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'authorized', NULL, ?, NULL, ?)`,
        p.id,
        p.agentId,
        p.resource,
        p.payTo,
        p.network,
        p.asset,
        amount,
        p.nonce,
        p.validBefore,
        p.header.name,
        p.header.value,
        p.createdAt,
        p.createdAt,
      ),
      ...epilogue,
    ],
    audit: [
      {
        type: "agent.x402_payment.authorized",
        reference: p.id,
        chargeId: null,
        agentId: p.agentId,
        merchantId: null,
        amountMinor: centsIfWhole(p.amountBaseUnits),
        amountBaseUnits: p.amountBaseUnits.toString(),
        currency: "USD",
        data: { resource: p.resource, payTo: p.payTo, network: p.network, nonce: p.nonce, validBefore: p.validBefore },
        createdAt: p.createdAt,
      },
    ],
  };
}
