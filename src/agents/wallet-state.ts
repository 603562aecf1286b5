import type { ChargeRow } from "../charges/service";
import { paidByAgentSince, payableChargeRead } from "../charges/statements";
import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import { prepared } from "../db/statements";
import { transferredByAgentSince } from "../ledger/figures";
import { placementOf } from "../ledger/place";
import type { TransferIntents } from "../ledger/transfer-intents";
import { type BatchEnd, HeldFigures } from "../lib/held-figures";
import { utcDayStart } from "../lib/time";
import { type Policy, parseStoredPolicy } from "./policy";
import { x402PaidByAgentSince } from "./x402-payments";

/** A charge as the wallet sees it, with what the policy needs to know of its merchant. */
export interface PayableSnapshot extends ChargeRow {
  merchantName: string;
  merchantCategory: string | null;
}

export interface ApprovalSnapshot {
  id: string;
  /** Null for an approval of an outbound x402 payment. */
  chargeId: string | null;
  agentId: string;
  status: string;
  reason: string;
  expiresAt: string;
}

/** An agent's figures as its wallet decides on them: exact, in the token's base units. */
export interface AgentState {
  balanceBaseUnits: bigint;
  policy: Policy;
  /** What the wallet paid in the current UTC day. */
  spentTodayBaseUnits: bigint;
  frozen: boolean;
}

export const APPROVAL_SELECT = `SELECT id, charge_id AS chargeId, agent_id AS agentId, status, reason, expires_at AS expiresAt FROM approvals`;

const agentStatements = (db: D1Database, agentId: string, now: number) => [
  db
    .prepare(
      "SELECT CAST(balance_base_units AS TEXT) AS balanceBaseUnits, policy, frozen_at AS frozenAt FROM agents WHERE id = ?",
    )
    .bind(agentId),
  db
    .prepare(
      // Payments of charges in this shard, and transfers toward charges in other shards (pending or
      // completed: a reversed one gave the money back), and payments of x402 paywalls anywhere, in base
      // units, read as text (exact past 2^53).
      `SELECT CAST(${paidByAgentSince("?1", "?2")} + ${transferredByAgentSince("?1", "?2")}
         + ${x402PaidByAgentSince("?1", "?2")} AS TEXT) AS spent`,
    )
    .bind(agentId, utcDayStart(now)),
];

function agentStateOf(agent: D1Result | undefined, spent: D1Result | undefined): AgentState | undefined {
  const row = agent?.results[0] as { balanceBaseUnits: string; policy: string; frozenAt: string | null } | undefined;
  if (!row) return undefined;
  return {
    balanceBaseUnits: BigInt(row.balanceBaseUnits),
    policy: parseStoredPolicy(row.policy),
    spentTodayBaseUnits: BigInt((spent?.results[0] as { spent: string } | undefined)?.spent ?? "0"),
    frozen: row.frozenAt !== null,
  };
}

/** The agent and an existing charge (with this agent's pending approval of it), read in one batch: one consistent snapshot. */
export async function readChargeState(env: Env, agentId: string, chargeId: string, now: number) {
  const place = placementOf(env);
  const at = place.ofId(chargeId);
  const home = await place.ofAgent(agentId);
  // This agent's approvals are held on its home.
  const agentReads = [
    home.db
      .prepare(`${APPROVAL_SELECT} WHERE charge_id = ? AND agent_id = ? AND status = 'pending'`)
      .bind(chargeId, agentId),
    ...agentStatements(home.db, agentId, now),
  ];
  // One snapshot when both live in one database; apart, each side's own (no charge where none can be).
  const chargeRead = async () =>
    at ? ((await prepared(at.db, payableChargeRead(chargeId)).all()) as D1Result) : undefined;
  const [charge, approval, agent, spent] =
    home === at
      ? await home.db.batch([prepared(home.db, payableChargeRead(chargeId)), ...agentReads])
      : [await chargeRead(), ...(await home.db.batch(agentReads))];
  return {
    charge: charge?.results[0] as PayableSnapshot | undefined,
    pendingApproval: approval?.results[0] as ApprovalSnapshot | undefined,
    agent: agentStateOf(agent, spent),
  };
}

/** The agent's balance, policy and today's spend, read from D1. */
export async function readAgentState(env: Env, agentId: string, now: number): Promise<AgentState | undefined> {
  const { db } = await placementOf(env).ofAgent(agentId);
  const [agent, spent] = await db.batch(agentStatements(db, agentId, now));
  return agentStateOf(agent, spent);
}

/**
 * A charge with its merchant, read ahead of the agent's turn (it does not depend on it). One
 * statement: only a hold needs the charge's pending approval, and a hold reads everything again.
 */
export async function readCharge(env: Env, chargeId: string): Promise<PayableSnapshot | undefined> {
  const db = placementOf(env).ofId(chargeId)?.db;
  return (db && (await prepared(db, payableChargeRead(chargeId)).first<PayableSnapshot>())) ?? undefined;
}

/**
 * The agent's balance, policy and today's spend as its wallet object last
 * saw them committed. Every change to them goes through that one object
 * (payments, credits, deposits, policy changes), so it can keep them in
 * memory: a payment updates them after its batch committed, anything else (an
 * unexpected refusal, an error, a credit, a new policy, a new UTC day) makes
 * the next read go to D1, once no batch of this agent is in flight. Payments
 * whose batch is in flight are held back (HeldFigures), so a decision never
 * spends what an earlier one already has. The batch still guards the balance,
 * so a wrong figure here could only refuse.
 */
interface CachedAgent {
  agentId: string;
  day: string;
  state: AgentState;
}

export class AgentStateCache {
  private readonly figures = new HeldFigures<CachedAgent>();

  /** The figures a decision sees: the committed ones less what payments in flight hold. */
  async read(env: Env, agentId: string, now: number): Promise<AgentState | undefined> {
    const day = utcDayStart(now);
    const load = async () => {
      const state = await readAgentState(env, agentId, now);
      return state && { agentId, day, state };
    };
    const view = await this.figures.read(load, (c) => c.agentId === agentId && c.day === day);
    if (!view) return undefined;
    const { state } = view.committed;
    return {
      ...state,
      balanceBaseUnits: state.balanceBaseUnits - view.held,
      spentTodayBaseUnits: state.spentTodayBaseUnits + view.held,
    };
  }

  /**
   * The decision `judge` makes on this agent's figures; one that would not
   * pay is made again once nothing is in flight (HeldFigures.decide).
   */
  decide<D>(
    env: Env,
    agentId: string,
    now: number,
    judge: (agent: AgentState | undefined) => D,
    pays: (decision: D) => boolean,
  ): Promise<D> {
    return this.figures.decide(async () => judge(await this.read(env, agentId, now)), pays);
  }

  /** Waits until no batch of this agent is in flight, for operations that read D1 themselves. */
  settled(): Promise<void> {
    return this.figures.settled();
  }

  /** Holds a payment's exact amount while its batch is in flight; call the result once with how the batch ended. */
  hold(amountBaseUnits: bigint): (end: BatchEnd) => void {
    return this.figures.hold(amountBaseUnits, ({ state }) => {
      state.balanceBaseUnits -= amountBaseUnits;
      state.spentTodayBaseUnits += amountBaseUnits;
    });
  }

  forget(): void {
    this.figures.forget();
  }
}

/** A wallet operation's turn in its object: the remembered figures, and how to let the next operation start. */
export interface WalletTurn {
  cache: AgentStateCache;
  /** Ends the turn before the operation finishes: called once its batch is handed to the ledger. */
  endTurn: () => void;
  /** Ends the wallet object as a crash would (fault-injection tests only). */
  abort?: () => void;
  /** Where a payment's transfer between shards is remembered until decided (the wallet object's storage, for its alarm). */
  intents?: TransferIntents;
}

/**
 * What one wallet operation runs with: the Worker's bindings, the agent whose
 * wallet it is, and the request's reserved Idempotency-Key when it carries
 * one (the answer is then stored in the operation's own batch, so the effect
 * and its answer commit together).
 */
export interface WalletCall {
  env: Env;
  agentId: string;
  slot?: IdempotencySlot;
}

/** A wallet operation that decides on the agent's figures: it runs in its turn in the agent's wallet object. */
export interface WalletTurnCall extends WalletCall {
  turn: WalletTurn;
}
