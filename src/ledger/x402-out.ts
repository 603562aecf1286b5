import { guard, guards, type SqlStatement, sqlStatement } from "../db/statements";
import { INSUFFICIENT_BALANCE } from "../lib/error-codes";
import { baseUnitsParam, centsIfWhole } from "../lib/money";
import { agentNotFrozenCheck } from "./movements";
import { outboxEvent } from "./outbox";
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
  /** The chain's head when the settlement address's cover was read (where a search for its use starts). */
  recordedBlock: number | null;
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
           valid_before, header_name, header_value, status, recorded_block, tx_hash, created_at, settled_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'authorized', ?, NULL, ?, NULL, ?)`,
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
        p.recordedBlock,
        p.createdAt,
        p.createdAt,
      ),
      ...epilogue,
    ],
    audit: [
      outboundAudit(
        p,
        "agent.x402_payment.authorized",
        { resource: p.resource, payTo: p.payTo, validBefore: p.validBefore },
        p.createdAt,
      ),
    ],
  };
}

/** The refusal of a settle or release whose payment is no longer `authorized`: another worker decided it first. */
export const X402_OUT_DECIDED = "agent_x402_payment_decided";

/** What a settle or release needs of a stored authorized payment. */
export interface DecidedX402Payment {
  id: string;
  agentId: string;
  network: string;
  amountBaseUnits: bigint;
  nonce: string;
}

const stillAuthorized = (id: string) =>
  guard(X402_OUT_DECIDED, "EXISTS (SELECT 1 FROM agent_x402_payments WHERE id = ? AND status = 'authorized')", id);

/** An outbound payment's audit row: its amount exact, no charge and no merchant (the payee is nobody's here). */
const outboundAudit = (p: DecidedX402Payment, type: string, data: Record<string, unknown>, at: string) => ({
  type,
  reference: p.id,
  chargeId: null,
  agentId: p.agentId,
  merchantId: null,
  amountMinor: centsIfWhole(p.amountBaseUnits),
  amountBaseUnits: p.amountBaseUnits.toString(),
  currency: "USD",
  data: { network: p.network, nonce: p.nonce, ...data },
  createdAt: at,
});

/**
 * The chain showed the authorization used by `transaction`: the payment `settled`, once (guarded on
 * `authorized`), with its audit row and `agent_payment.settled` (`event`: the payment object as the
 * API shows it, for the operator's endpoints). No money moves: the wallet was debited when it was signed.
 */
export function agentX402SettledPlan(
  p: DecidedX402Payment,
  transaction: string,
  at: string,
  event: Record<string, unknown>,
): CommitPlan {
  return {
    statements: [
      stillAuthorized(p.id),
      sqlStatement(
        "UPDATE agent_x402_payments SET status = 'settled', tx_hash = ?, settled_at = ?, updated_at = ? WHERE id = ? AND status = 'authorized'",
        transaction,
        at,
        at,
        p.id,
      ),
      outboxEvent("agent_payment.settled", null, event, at),
    ],
    audit: [outboundAudit(p, "agent.x402_payment.settled", { transaction }, at)],
  };
}

/**
 * The chain showed the authorization past use and unused: the debit given back, once (guarded on
 * `authorized`), by a reversing posting from the outbound account to the agent, with the payment
 * `released`, its audit row and `agent_payment.released`. A frozen agent is credited all the same:
 * a freeze stops spending, not money coming back.
 */
export function agentX402ReleasedPlan(
  p: DecidedX402Payment,
  at: string,
  event: Record<string, unknown>,
  reason: string,
): CommitPlan {
  return {
    statements: [
      stillAuthorized(p.id),
      sqlStatement(
        "UPDATE agent_x402_payments SET status = 'released', updated_at = ? WHERE id = ? AND status = 'authorized'",
        at,
        p.id,
      ),
      ...postingStatements(
        `${p.id}:release`,
        [{ from: x402OutAccount(p.network), to: `agent:${p.agentId}`, amountBaseUnits: p.amountBaseUnits }],
        at,
      ),
      outboxEvent("agent_payment.released", null, event, at),
    ],
    audit: [outboundAudit(p, "agent.x402_payment.released", { reason }, at)],
  };
}
