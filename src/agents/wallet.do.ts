import { DurableObject } from "cloudflare:workers";
import type { Env } from "../config/env";
import type { IdempotencySlot } from "../db/idempotency";
import type { SqlStatement } from "../db/statements";
import { type ChargeRefund, moveMoney } from "../ledger/move";
import type { DepositTransfer } from "../ledger/movements";
import { placementOf } from "../ledger/place";
import { TransfersInFlight } from "../ledger/transfer-intents";
import { type DueTransfers, driveDue } from "../ledger/transfer-recovery";
import { serialQueue } from "../lib/serial";
import { nowIso } from "../lib/time";
import { setFrozen } from "./freeze";
import type { PayOutcome } from "./outcomes";
import type { Policy } from "./policy";
import {
  drawFromWallet,
  type NewChargePayment,
  payCharge,
  payNewCharge,
  type WalletDraw,
  writeUnlessFrozen,
} from "./wallet";
import { creditDeposit, creditWallet, setPolicy, type WalletCredit } from "./wallet-credit";
import { grantApproval } from "./wallet-hold";
import { AgentStateCache, readCharge, type WalletTurnCall } from "./wallet-state";
import { type DueAgentX402Payment, releaseAgentX402Payment } from "./x402-life";
import { payX402, type SignedX402Payment } from "./x402-pay";

/**
 * One per agent (named by the agent id). Every mutation of the agent's wallet
 * runs here, one at a time: the reads and the policy decision of one operation
 * finish before the next begins, so checks and writes never interleave. A
 * payment ends its turn once its batch is handed to the ledger; the amount is
 * held back from later decisions until that batch ends (AgentStateCache), so
 * one agent's payments share the ledger's group commits instead of queueing
 * behind each other's.
 */
export class WalletDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();
  /** This agent's balance, policy and spend today, kept between operations (see AgentStateCache). */
  private readonly cache = new AgentStateCache();
  /** This agent's transfers between shards in flight, kept in storage for the alarm (the ledger drives them). */
  private readonly inFlight = new TransfersInFlight(this.ctx.storage);

  payCharge(agentId: string, chargeId: string, slot?: IdempotencySlot) {
    // The charge is read while earlier payments of this agent are still in their turn.
    const ahead = readCharge(this.env, chargeId);
    ahead.catch(() => undefined);
    return this.expiringHolds(
      agentId,
      this.serialize((endTurn) => payCharge(this.call(agentId, endTurn, slot), chargeId, ahead)),
    );
  }

  payNewCharge(agentId: string, payment: NewChargePayment, slot?: IdempotencySlot) {
    return this.expiringHolds(
      agentId,
      this.serialize((endTurn) => payNewCharge(this.call(agentId, endTurn, slot), payment)),
    );
  }

  /**
   * Pays someone else's x402 paywall with an authorization signed for it: decided by the policy and
   * debited in its turn. A payment whose granted approval another one used first is decided again
   * in a new turn, without it (a new approval is held, or whatever the policy says).
   */
  async payX402(agentId: string, signed: SignedX402Payment, slot?: IdempotencySlot) {
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.serialize((endTurn) => payX402(this.call(agentId, endTurn, slot), signed));
      if (outcome.kind === "approval") await this.alarmAt(agentId, outcome.expiresAt);
      if (outcome.kind !== "approval_used") return outcome;
      // Only a second object for the agent (during a restart) races it more than once.
      if (attempt === 3) return { kind: "conflict" as const, reason: "approval_not_pending" as const };
    }
  }

  /** An operation's call in its turn: this object's remembered figures, and how it lets the next operation start. */
  private call(agentId: string, endTurn: () => void, slot: IdempotencySlot | undefined): WalletTurnCall {
    const turn = { cache: this.cache, endTurn, abort: this.abort, intents: this.inFlight };
    return { env: this.env, agentId, turn, slot };
  }

  private readonly abort = () => this.ctx.abort("fault injection");

  /** An operation that moves this agent's money otherwise than by its policy's decision, in its turn; the figures are read again after it. */
  private readonly inTurn = <T>(work: () => Promise<T>): Promise<T> => this.serialize(() => this.forgetting(work()));

  /**
   * Drives this agent's transfers between shards the minute cron hands over (ledger/transfer-recovery.ts),
   * in its turn, ordered with its payments: the backstop for a transfer no alarm finished.
   */
  resumeTransfers(due: DueTransfers) {
    return this.inTurn(() => driveDue(this.env, due, { abort: this.abort }));
  }

  /** A payment held for a human gets an alarm at its approval's expiry. */
  private async expiringHolds(agentId: string, operation: Promise<PayOutcome>): Promise<PayOutcome> {
    const outcome = await operation;
    if (outcome.kind === "approval") await this.alarmAt(agentId, outcome.expiresAt);
    return outcome;
  }

  /** The alarm at a pending approval's expiry, unless an earlier one is set. */
  private async alarmAt(agentId: string, expiresAt: string) {
    await this.ctx.storage.put("agentId", agentId);
    const at = Date.parse(expiresAt);
    const current = await this.ctx.storage.getAlarm();
    if (current === null || at < current) await this.ctx.storage.setAlarm(at);
  }

  /**
   * Drives the transfers between shards this object has in flight (in its turn), expires this
   * agent's approvals that are due, then sets the alarm for whichever comes next. Idempotent: firing
   * twice decides nothing twice (every step is guarded), and the minute cron sweeps whatever an alarm missed.
   */
  override async alarm(): Promise<void> {
    // Approvals expire even when a transfer's drive fails outright; the transfers are retried either way.
    const retryAt = await this.inFlight.drive(this.env, this.inTurn, { abort: this.abort });
    const nextExpiry = await this.expireApprovals();
    const next = Math.min(retryAt ?? Number.POSITIVE_INFINITY, nextExpiry ?? Number.POSITIVE_INFINITY);
    if (Number.isFinite(next)) await this.ctx.storage.setAlarm(next);
  }

  /** Expires this agent's approvals that are due (held in its home); answers when the next one is. */
  private async expireApprovals(): Promise<number | null> {
    const agentId = await this.ctx.storage.get<string>("agentId");
    if (!agentId) return null;
    const home = await placementOf(this.env).ofKnown("agent", agentId);
    if (!home) return null;
    const now = nowIso();
    await home.db
      .prepare(
        "UPDATE approvals SET status = 'expired', decided_at = ? WHERE agent_id = ? AND status = 'pending' AND expires_at <= ?",
      )
      .bind(now, agentId, now)
      .run();
    const next = await home.db
      .prepare("SELECT MIN(expires_at) AS next FROM approvals WHERE agent_id = ? AND status = 'pending'")
      .bind(agentId)
      .first<{ next: string | null }>();
    return next?.next ? Date.parse(next.next) : null;
  }

  drawFromWallet(agentId: string, draw: WalletDraw, slot?: IdempotencySlot) {
    return this.serialize((endTurn) => drawFromWallet(this.call(agentId, endTurn, slot), draw));
  }

  grantApproval(agentId: string, approvalId: string, decidedBy: string, slot?: IdempotencySlot) {
    return this.serialize((endTurn) => grantApproval(this.call(agentId, endTurn, slot), approvalId, decidedBy));
  }

  /**
   * A write that must not land for a frozen agent (a PayLink grant): decided and written in one turn,
   * so no freeze lands between. The statements go where the object `beside` (an id) lives.
   */
  writeUnlessFrozen(agentId: string, statements: SqlStatement[], beside?: string) {
    return this.serialize((endTurn) => writeUnlessFrozen(this.call(agentId, endTurn, undefined), statements, beside));
  }

  credit(agentId: string, amountMinor: number, reference: string | null, by: string, slot?: IdempotencySlot) {
    const credit: WalletCredit = { amountMinor, reference, by };
    return this.inTurn(() => creditWallet({ env: this.env, agentId, slot }, credit));
  }

  /**
   * A merchant's refund of this agent's payment, moved by the ledger in the agent's turn: the
   * refunds service decided and guarded it on the charge's side; the ledger commits it where the
   * charge and the agent live (see moveMoney).
   */
  refund(refund: ChargeRefund) {
    return this.inTurn(() => moveMoney(this.env, refund, { intents: this.inFlight, abort: this.abort }));
  }

  creditDeposit(transfer: DepositTransfer, credit: boolean) {
    return this.inTurn(() => creditDeposit(this.env, transfer, credit));
  }

  /**
   * An outbound x402 payment expired unused, given back in the agent's turn: the wallet reads its
   * balance from D1 again after the credit, as after any credit from outside a payment.
   */
  releaseX402(payment: DueAgentX402Payment, reason: string) {
    return this.inTurn(() => releaseAgentX402Payment(this.env, payment, reason));
  }

  setPolicy(agentId: string, policy: Policy) {
    return this.inTurn(() => setPolicy(this.env, agentId, policy));
  }

  /** A freeze takes its turn between payments; decisions after it read the frozen agent from D1. */
  setFrozen(agentId: string, frozen: boolean, reason: string | null, by: string) {
    return this.inTurn(() => setFrozen(this.env, agentId, frozen, reason, by));
  }

  /** Operations that change the balance or the policy otherwise than by a payment: read them from D1 next time. */
  private async forgetting<T>(operation: Promise<T>): Promise<T> {
    this.cache.forget();
    try {
      return await operation;
    } finally {
      this.cache.forget();
    }
  }
}

export const walletOf = (env: Env, agentId: string) => env.WALLET.getByName(agentId);
