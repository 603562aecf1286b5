import type { Env } from "../env";
import { settingsOf } from "../env";
import { executeBatch } from "../db/batch";
import {
  CHARGE_ROW_COLUMNS,
  chargeCreationStatements,
  chargeView,
  type ChargeRow,
  type ChargeView,
} from "../charges/service";
import { ledgerOf, type CommitResult } from "../ledger/ledger.do";
import { HeldFigures, type BatchEnd } from "../lib/held-figures";
import {
  AGENT_FROZEN,
  agentCreditPlan,
  agentNotFrozenCheck,
  depositPlan,
  payableChecks,
  walletPaymentPlan,
  type DepositTransfer,
} from "../ledger/movements";
import { guard, guardReasonOf, guards, sqlStatement, type SqlStatement } from "../ledger/plan";
import { canonicalJson } from "../ledger/audit";
import { codeWith, type CodeWith } from "../lib/error-codes";
import { faultPoint } from "../lib/faults";
import { newId } from "../lib/ids";
import { USDC_UNITS_PER_CENT } from "../lib/money";
import { nowIso, utcDayStart } from "../lib/time";
import { outboxEvent } from "../webhooks/outbox";
import { balanceAfter } from "../ledger/postings";
import { evaluatePolicy, parseStoredPolicy, POLICY_REASONS, type Policy } from "./policy";
import {
  PENDING_FIGURE,
  storeResponseStatements,
  storeTemplateStatements,
  type IdempotencySlot,
} from "../lib/idempotency";
import { heldBody, paidBody, type PaidView } from "./outcomes";

/**
 * Where a wallet operation stores its answer when its request carries an
 * Idempotency-Key: in the same batch as the payment or the hold, so the effect
 * and its answer commit together. `view` is how the route answers a payment.
 */
export interface ResponseSlot extends IdempotencySlot {
  view: PaidView;
}

/** Outcomes of a wallet operation; routes map each to a status in one table (outcomes.ts). */
export type PayOutcome =
  | { kind: "paid"; charge: ChargeView; merchantBalanceMinor: number }
  | { kind: "approval"; approvalId: string; reason: string; expiresAt: string; charge: ChargeView }
  | { kind: "rejected"; reason: CodeWith<402> }
  | { kind: "conflict"; reason: CodeWith<409> }
  | { kind: "not_found"; reason: CodeWith<404> }
  /** The agent is frozen: nothing of its money moves (403 to the agent, 409 to a merchant's draw or a grant). */
  | { kind: "frozen" };

/** A charge as the wallet sees it, with what the policy needs to know of its merchant. */
export interface PayableSnapshot extends ChargeRow {
  merchantName: string;
  merchantCategory: string | null;
}

interface ApprovalSnapshot {
  id: string;
  chargeId: string;
  agentId: string;
  status: string;
  reason: string;
  expiresAt: string;
}

interface AgentState {
  balanceMinor: number;
  policy: Policy;
  spentTodayMinor: number;
  frozen: boolean;
}

const CHARGE_SELECT = `SELECT ${CHARGE_ROW_COLUMNS}, m.name AS merchantName, m.category AS merchantCategory
  FROM charges c JOIN merchants m ON m.id = c.merchant_id WHERE c.id = ?`;

const APPROVAL_SELECT = `SELECT id, charge_id AS chargeId, agent_id AS agentId, status, reason, expires_at AS expiresAt FROM approvals`;

const agentStatements = (db: D1Database, agentId: string, now: number) => [
  db
    .prepare("SELECT balance_minor AS balanceMinor, policy, frozen_at AS frozenAt FROM agents WHERE id = ?")
    .bind(agentId),
  db
    .prepare(
      `SELECT COALESCE(SUM(amount_minor), 0) AS spent FROM charges
     WHERE agent_id = ? AND status = 'paid' AND method IN ('ledger', 'paylink') AND paid_at >= ?`,
    )
    .bind(agentId, utcDayStart(now)),
];

function agentStateOf(agent: D1Result | undefined, spent: D1Result | undefined): AgentState | undefined {
  const row = agent?.results[0] as { balanceMinor: number; policy: string; frozenAt: string | null } | undefined;
  if (!row) return undefined;
  return {
    balanceMinor: row.balanceMinor,
    policy: parseStoredPolicy(row.policy),
    spentTodayMinor: (spent?.results[0] as { spent: number } | undefined)?.spent ?? 0,
    frozen: row.frozenAt !== null,
  };
}

/** The agent and an existing charge (with this agent's pending approval of it), read in one batch: one consistent snapshot. */
async function readChargeState(env: Env, agentId: string, chargeId: string, now: number) {
  const db = env.DB;
  const [charge, approval, agent, spent] = await db.batch([
    db.prepare(CHARGE_SELECT).bind(chargeId),
    db
      .prepare(`${APPROVAL_SELECT} WHERE charge_id = ? AND agent_id = ? AND status = 'pending'`)
      .bind(chargeId, agentId),
    ...agentStatements(db, agentId, now),
  ]);
  return {
    charge: charge?.results[0] as PayableSnapshot | undefined,
    pendingApproval: approval?.results[0] as ApprovalSnapshot | undefined,
    agent: agentStateOf(agent, spent),
  };
}

/** The agent's balance, policy and today's spend, read from D1. */
export async function readAgentState(env: Env, agentId: string, now: number): Promise<AgentState | undefined> {
  const [agent, spent] = await env.DB.batch(agentStatements(env.DB, agentId, now));
  return agentStateOf(agent, spent);
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
      balanceMinor: state.balanceMinor - view.heldMinor,
      spentTodayMinor: state.spentTodayMinor + view.heldMinor,
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

  /** Holds a payment's amount while its batch is in flight; call the result once with how the batch ended. */
  hold(amountMinor: number): (end: BatchEnd) => void {
    return this.figures.hold(amountMinor, ({ state }) => {
      state.balanceMinor -= amountMinor;
      state.spentTodayMinor += amountMinor;
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
}

/**
 * A charge with its merchant, read ahead of the agent's turn (it does not depend on it). One
 * statement: only a hold needs the charge's pending approval, and a hold reads everything again.
 */
export async function readCharge(env: Env, chargeId: string): Promise<PayableSnapshot | undefined> {
  return (await env.DB.prepare(CHARGE_SELECT).bind(chargeId).first<PayableSnapshot>()) ?? undefined;
}

/** A frozen agent's wallet decides nothing; otherwise its policy decides. */
function decide(
  agent: AgentState,
  charge: PayableSnapshot,
  skipApprovalThreshold: boolean,
): ReturnType<typeof evaluatePolicy> | { kind: "frozen" } {
  if (agent.frozen) return { kind: "frozen" };
  return evaluatePolicy(agent.policy, {
    amountMinor: charge.amountMinor,
    merchantCategory: charge.merchantCategory,
    spentTodayMinor: agent.spentTodayMinor,
    balanceMinor: agent.balanceMinor,
    skipApprovalThreshold,
  });
}

/** The policy's decision on a charge not stored yet, from the wallet object's figures; undefined when the agent does not exist. */
const decideOnCharge = (
  env: Env,
  agentId: string,
  now: number,
  charge: PayableSnapshot,
  skipApprovalThreshold: boolean,
  turn: WalletTurn,
) =>
  turn.cache.decide(
    env,
    agentId,
    now,
    (agent) => agent && decide(agent, charge, skipApprovalThreshold),
    (d) => d?.kind === "pay",
  );

interface CommitOptions {
  turn: WalletTurn;
  respond?: ResponseSlot;
  method?: "ledger" | "paylink";
  prelude?: SqlStatement[];
  extraStatements?: SqlStatement[];
  auditData?: Record<string, unknown>;
}

/**
 * Whether the charge was paid with this reference (the payment's batch landed), and if so the
 * merchant's balance right after it, as the batch's own answer has it: the merchant's postings up
 * to this payment's (a group's entries are appended in its plans' order, and balances are their
 * sums). Undefined when it did not land; throws when D1 cannot tell.
 */
async function landedPayment(
  env: Env,
  charge: { id: string; merchantId: string },
  reference: string,
): Promise<{ balanceMinor: number } | undefined> {
  const account = `merchant:${charge.merchantId}`;
  const row = await env.DB.prepare(
    `SELECT (SELECT COALESCE(SUM(amount_minor), 0) FROM ledger_entries WHERE account = ?1
               AND rowid <= (SELECT MAX(rowid) FROM ledger_entries WHERE transfer_id = ?2 AND account = ?1)) AS balanceMinor
     FROM charges WHERE id = ?3 AND reference = ?2`,
  )
    .bind(account, reference, charge.id)
    .first<{ balanceMinor: number }>();
  return row ?? undefined;
}

/** Commits a wallet payment of a pending charge and answers the paid outcome, or why it did not land. */
async function commitPayment(
  env: Env,
  agentId: string,
  charge: PayableSnapshot,
  options: CommitOptions,
): Promise<PayOutcome> {
  const paidAt = nowIso();
  const reference = newId("payment");
  const method = options.method ?? "ledger";
  const paidCharge = chargeView({ ...charge, status: "paid", agentId, method, reference, paidAt });
  const { respond } = options;
  // The answer, with the merchant's balance after this payment written in by the batch itself.
  const epilogue = respond
    ? storeTemplateStatements(
        respond,
        200,
        JSON.stringify(paidBody(respond.view, { charge: paidCharge, merchantBalanceMinor: PENDING_FIGURE })),
        "merchantBalanceMinor",
        "SELECT balance_minor FROM merchants WHERE id = ?",
        charge.merchantId,
      )
    : [];
  const { turn } = options;
  // Held until the batch ends, so the next decision (which may start once the batch is handed over) cannot spend it too.
  const end = turn.cache.hold(charge.amountMinor);
  let result: CommitResult | undefined;
  let failure: unknown;
  try {
    faultPoint("payment.before_commit", { abort: turn.abort });
    const committing = ledgerOf(env).commit(
      walletPaymentPlan({
        charge,
        agentId,
        method,
        reference,
        paidAt,
        prelude: options.prelude,
        extraStatements: options.extraStatements,
        epilogue,
        auditData: options.auditData,
      }),
    );
    turn.endTurn();
    result = await committing;
  } catch (error) {
    failure = error;
  }
  if (!result || result.kind === "refused") {
    // The batch may have landed though this call did not hear so: an answer lost after the commit,
    // or a group commit re-applied one plan at a time after it had in fact committed (this plan's
    // second try is then refused by its own write, or fails on the charge it creates). The
    // reference is this attempt's own, so a charge that carries it was paid by this payment.
    let landed: { balanceMinor: number } | undefined;
    try {
      landed = await landedPayment(env, charge, reference);
    } catch (lookupError) {
      // Cannot tell whether it landed: nothing definite to answer, and the wallet's figures are unsure.
      end("unsure");
      throw failure ?? lookupError;
    }
    if (landed) {
      end("committed");
      return { kind: "paid", charge: paidCharge, merchantBalanceMinor: landed.balanceMinor };
    }
  }
  if (!result) {
    end("unsure");
    throw failure;
  }
  if (result.kind === "refused") {
    // A refused balance means the remembered figures were wrong; a freeze that landed first, that
    // they are (the next read sees it); any other refusal changed nothing of this agent.
    const balance = result.reason === POLICY_REASONS.balance;
    const frozen = result.reason === AGENT_FROZEN;
    end(balance || frozen ? "unsure" : "unchanged");
    if (frozen) return { kind: "frozen" };
    return balance
      ? { kind: "rejected", reason: POLICY_REASONS.balance }
      : { kind: "conflict", reason: codeWith(409, result.reason) };
  }
  end("committed");
  faultPoint("payment.after_commit");
  const merchantBalanceMinor = balanceAfter(result.results, `merchant:${charge.merchantId}`) ?? 0;
  return { kind: "paid", charge: paidCharge, merchantBalanceMinor };
}

/**
 * Pays a stored charge from the agent's wallet. Runs inside the agent's wallet
 * Durable Object, so no two decisions for one agent interleave; the charge's
 * own state is guarded in the batch, so two agents can never both pay it.
 */
export async function payCharge(
  env: Env,
  agentId: string,
  chargeId: string,
  turn: WalletTurn,
  ahead: Promise<PayableSnapshot | undefined>,
  respond?: ResponseSlot,
): Promise<PayOutcome> {
  const now = Date.now();
  const act = (
    judged: ReturnType<typeof judgeCharge>,
    pendingApproval: ApprovalSnapshot | undefined,
  ): Promise<PayOutcome> | PayOutcome => {
    if (judged.kind === "outcome") return judged.outcome;
    const { charge, decision } = judged;
    if (decision.kind === "frozen") return { kind: "frozen" };
    if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
    if (decision.kind === "approval")
      return requestApproval(env, agentId, charge, decision.reason, pendingApproval, now, [], respond);
    return commitPayment(env, agentId, charge, { turn, respond });
  };
  const charge = await ahead;
  const first = await turn.cache.decide(env, agentId, now, (agent) => judgeCharge({ charge, agent }), paysNow);
  if (first.kind === "outcome" || first.decision.kind !== "approval") return act(first, undefined);
  // A hold is rare and must see this agent's latest approval of the charge: decide again on one fresh read
  // (nothing of this agent is in flight: `decide` waited for it).
  turn.cache.forget();
  const fresh = await readChargeState(env, agentId, chargeId, now);
  return act(judgeCharge(fresh), fresh.pendingApproval);
}

const paysNow = (judged: ReturnType<typeof judgeCharge>) =>
  judged.kind === "decision" && judged.decision.kind === "pay";

/** What the wallet can say of a stored charge before anything is written: an outcome already, or the policy's decision. */
function judgeCharge({ charge, agent }: { charge: PayableSnapshot | undefined; agent: AgentState | undefined }) {
  if (!charge)
    return {
      kind: "outcome" as const,
      outcome: { kind: "not_found", reason: "charge_not_found" } satisfies PayOutcome,
    };
  if (!agent)
    return { kind: "outcome" as const, outcome: { kind: "not_found", reason: "agent_not_found" } satisfies PayOutcome };
  // A charge being settled on chain by x402 is not open to the wallet.
  if (charge.status !== "pending" || charge.x402Claim)
    return {
      kind: "outcome" as const,
      outcome: { kind: "conflict", reason: "charge_not_pending" } satisfies PayOutcome,
    };
  return { kind: "decision" as const, charge, decision: decide(agent, charge, false) };
}

/**
 * Pays a charge that is born with the payment (a checkout link's): the charge
 * is created in the same batch that pays it, or that holds it for approval,
 * so a refused payment leaves no charge behind. `birthGuards` run first (the
 * link is still active).
 */
export async function payNewCharge(
  env: Env,
  agentId: string,
  charge: PayableSnapshot,
  birthGuards: SqlStatement[],
  turn: WalletTurn,
  respond?: ResponseSlot,
): Promise<PayOutcome> {
  const now = Date.now();
  const decision = await decideOnCharge(env, agentId, now, charge, false, turn);
  if (!decision) return { kind: "not_found", reason: "agent_not_found" };
  if (decision.kind === "frozen") return { kind: "frozen" };
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  const prelude = [...birthGuards, ...chargeCreationStatements(charge, charge.merchantName)];
  if (decision.kind === "approval")
    return requestApproval(env, agentId, charge, decision.reason, undefined, now, prelude, respond);
  return commitPayment(env, agentId, charge, { turn, prelude, respond });
}

/**
 * Draws on a PayLink grant: a pre-authorized human decision, so the approval
 * threshold is skipped, but hard limits and the balance apply. The charge is
 * created already paid (method `paylink`); `grantStatements` guard and move
 * the grant's figures in the same batch.
 */
export async function drawFromWallet(
  env: Env,
  agentId: string,
  charge: PayableSnapshot,
  grantStatements: SqlStatement[],
  auditData: Record<string, unknown>,
  turn: WalletTurn,
  respond?: ResponseSlot,
): Promise<PayOutcome> {
  const decision = await decideOnCharge(env, agentId, Date.now(), charge, true, turn);
  if (!decision) return { kind: "not_found", reason: "agent_not_found" };
  if (decision.kind === "frozen") return { kind: "frozen" };
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  return commitPayment(env, agentId, charge, {
    turn,
    method: "paylink",
    prelude: chargeCreationStatements(charge, charge.merchantName),
    extraStatements: grantStatements,
    auditData,
    respond,
  });
}

/**
 * Holds a payment for a human. Paying again while this agent's approval is
 * pending returns that same approval; an expired one is replaced. The hold's
 * batch re-checks that the charge is still payable, as a payment's does: the
 * charge was read before (another agent's wallet may pay it meanwhile), so a
 * hold never lands on a charge that is paid or being settled by x402.
 */
async function requestApproval(
  env: Env,
  agentId: string,
  charge: PayableSnapshot,
  reason: string,
  existing: ApprovalSnapshot | undefined,
  now: number,
  prelude: SqlStatement[],
  respond: ResponseSlot | undefined,
): Promise<PayOutcome> {
  const view = chargeView(charge);
  const createdAt = nowIso(now);
  const expireStale: SqlStatement[] = [];
  if (existing) {
    // This agent's own pending approval of the charge (one per charge and agent; another agent's is its own affair).
    if (existing.expiresAt > createdAt)
      return {
        kind: "approval",
        approvalId: existing.id,
        reason: existing.reason,
        expiresAt: existing.expiresAt,
        charge: view,
      };
    expireStale.push(
      sqlStatement(
        "UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'",
        createdAt,
        existing.id,
      ),
    );
  }
  const approvalId = newId("approval");
  const expiresAt = nowIso(now + settingsOf(env).approvalTtlMs);
  const data = {
    approvalId,
    reason,
    expiresAt,
    chargeId: charge.id,
    agentId,
    merchantId: charge.merchantId,
    amountMinor: charge.amountMinor,
  };
  const held = { approvalId, reason, expiresAt, charge: view };
  try {
    await executeBatch(env.DB, [
      ...prelude,
      // After the prelude, so a charge born in this batch is checked as created.
      guards(agentNotFrozenCheck(agentId), ...payableChecks(charge)),
      ...expireStale,
      sqlStatement(
        `INSERT INTO approvals (id, charge_id, agent_id, merchant_id, amount_minor, reason, status, expires_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
        approvalId,
        charge.id,
        agentId,
        charge.merchantId,
        charge.amountMinor,
        reason,
        expiresAt,
        createdAt,
      ),
      outboxEvent("approval.required", charge.merchantId, data, createdAt),
      ...(respond ? storeResponseStatements(respond, 402, JSON.stringify(heldBody(held))) : []),
    ]);
  } catch (error) {
    const message = String(error);
    // The partial unique index (one pending approval per charge and agent): this agent's wallet object
    // decides one operation at a time, so only a second object for the same agent (during a restart) gets here.
    if (message.includes("UNIQUE constraint failed")) return { kind: "conflict", reason: "charge_awaiting_approval" };
    const guarded = guardReasonOf(error);
    if (guarded === AGENT_FROZEN) return { kind: "frozen" };
    if (guarded) return { kind: "conflict", reason: codeWith(409, guarded) };
    throw error;
  }
  return { kind: "approval", ...held };
}

/**
 * Grants a held payment: the approval flips to granted in the same batch that
 * pays the charge. Hard limits and the balance still apply; if they no longer
 * allow it the approval stays pending (402). As every payment of a charge born
 * from a checkout link, it is paid only while the link is active (409
 * `checkout_link_disabled`, the approval stays pending).
 */
export async function grantApproval(
  env: Env,
  agentId: string,
  approvalId: string,
  decidedBy: string,
  turn: WalletTurn,
  slot?: IdempotencySlot,
): Promise<PayOutcome> {
  // This reads the agent from D1: only once every payment of the agent in flight has committed or failed.
  await turn.cache.settled();
  const now = Date.now();
  const approval = (await env.DB.prepare(`${APPROVAL_SELECT} WHERE id = ?`)
    .bind(approvalId)
    .first()) as ApprovalSnapshot | null;
  if (!approval || approval.agentId !== agentId) return { kind: "not_found", reason: "approval_not_found" };
  const closed = await checkApprovalOpen(env, approval, now);
  if (closed) return closed;
  const { charge, agent } = await readChargeState(env, agentId, approval.chargeId, now);
  if (!charge || !agent) return { kind: "not_found", reason: "charge_not_found" };
  if (charge.status !== "pending") return { kind: "conflict", reason: "charge_not_pending" };
  const decision = decide(agent, charge, true);
  if (decision.kind === "frozen") return { kind: "frozen" };
  if (decision.kind === "reject") return { kind: "rejected", reason: decision.reason };
  const decidedAt = nowIso(now);
  return commitPayment(env, agentId, charge, {
    turn,
    extraStatements: [
      guard(
        "approval_not_pending",
        "EXISTS (SELECT 1 FROM approvals WHERE id = ? AND status = 'pending' AND expires_at > ?)",
        approvalId,
        decidedAt,
      ),
      sqlStatement(
        "UPDATE approvals SET status = 'granted', decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'",
        decidedAt,
        decidedBy,
        approvalId,
      ),
    ],
    auditData: { approvalId, approvedBy: decidedBy },
    respond: slot && { ...slot, view: { kind: "approval", approvalId } },
  });
}

/** Null when the approval can still be decided; otherwise the conflict, marking an overdue one expired. */
export async function checkApprovalOpen(
  env: Env,
  approval: { id: string; status: string; expiresAt: string },
  now: number,
): Promise<PayOutcome | null> {
  if (approval.status !== "pending") return { kind: "conflict", reason: "approval_not_pending" };
  const at = nowIso(now);
  if (approval.expiresAt <= at) {
    await env.DB.prepare("UPDATE approvals SET status = 'expired', decided_at = ? WHERE id = ? AND status = 'pending'")
      .bind(at, approval.id)
      .run();
    return { kind: "conflict", reason: "approval_expired" };
  }
  return null;
}

/** Credits the wallet from outside (a manual top-up), recorded in the ledger and the audit chain. */
export async function creditWallet(
  env: Env,
  agentId: string,
  amountMinor: number,
  reference: string | null,
  by: string,
  slot?: IdempotencySlot,
): Promise<{ ok: true; balanceMinor: number } | { ok: false; reason: string }> {
  // The answer names the balance after the credit; the batch writes it in (see storeTemplateStatements).
  const epilogue = slot
    ? storeTemplateStatements(
        slot,
        200,
        JSON.stringify(creditBody(PENDING_FIGURE)),
        "balanceMinor",
        "SELECT balance_minor FROM agents WHERE id = ?",
        agentId,
      )
    : [];
  const result = await ledgerOf(env).commit(
    agentCreditPlan({
      agentId,
      amountMinor,
      transferId: newId("credit"),
      reference,
      by,
      createdAt: nowIso(),
      epilogue,
    }),
  );
  if (result.kind === "refused") {
    if (result.reason !== "credit_already_recorded") return { ok: false, reason: result.reason };
    // This very credit landed in a batch whose answer was lost, and the sequencer committed it again:
    // it is done once. Its exact balance after is in the answer that batch stored (with a key); this is the balance now.
    const row = await env.DB.prepare("SELECT balance_minor AS balanceMinor FROM agents WHERE id = ?")
      .bind(agentId)
      .first<{ balanceMinor: number }>();
    if (!row) return { ok: false, reason: "agent_not_found" };
    return { ok: true, balanceMinor: row.balanceMinor };
  }
  return { ok: true, balanceMinor: balanceAfter(result.results, `agent:${agentId}`)! };
}

/** The answer to a credit. */
export const creditBody = (balanceMinor: number) => ({ balanceMinor });

/** Replaces the agent's policy; returns false if the agent does not exist. */
export async function setPolicy(env: Env, agentId: string, policy: Policy): Promise<boolean> {
  const result = await env.DB.prepare("UPDATE agents SET policy = ? WHERE id = ?")
    .bind(canonicalJson(policy), agentId)
    .run();
  return result.meta.changes > 0;
}

/**
 * Credits an on-chain deposit (or records it as blocked when the sender
 * failed screening). "duplicate" when this transfer was already recorded.
 */
export async function creditDeposit(
  env: Env,
  transfer: DepositTransfer,
  credit: boolean,
): Promise<"credited" | "blocked" | "duplicate"> {
  const amountMinor = Number(BigInt(transfer.value) / USDC_UNITS_PER_CENT);
  const result = await ledgerOf(env).commit(
    depositPlan({ ...transfer, depositId: newId("deposit"), amountMinor, createdAt: nowIso() }, credit),
  );
  if (result.kind === "refused") return "duplicate";
  return credit ? "credited" : "blocked";
}
