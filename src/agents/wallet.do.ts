import { DurableObject } from "cloudflare:workers";
import type { Env } from "../config/env";
import { log } from "../lib/log";
import { serialQueue } from "../lib/serial";
import { setFrozen } from "./freeze";
import type { Policy } from "./policy";
import type { DepositTransfer } from "../ledger/movements";
import type { SqlStatement } from "../db/statements";
import { nowIso } from "../lib/time";
import { ledgerOf, type CommitResult } from "../ledger/ledger.do";
import type { CommitPlan } from "../ledger/plan";
import type { IdempotencySlot } from "../db/idempotency";
import type { PayOutcome } from "./outcomes";
import {
  drawFromWallet,
  payCharge,
  payNewCharge,
  writeUnlessFrozen,
  type NewChargePayment,
  type WalletDraw,
} from "./wallet";
import { creditDeposit, creditWallet, setPolicy, type WalletCredit } from "./wallet-credit";
import { grantApproval } from "./wallet-hold";
import { AgentStateCache, readCharge, type WalletTurnCall } from "./wallet-state";
import { driveTransfer, refundAcrossShards, type TransferIntents } from "./wallet-transfer";

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

  /** An operation's call in its turn: this object's remembered figures, and how it lets the next operation start. */
  private call(agentId: string, endTurn: () => void, slot: IdempotencySlot | undefined): WalletTurnCall {
    const turn = {
      cache: this.cache,
      endTurn,
      abort: () => this.ctx.abort("fault injection"),
      intents: this.intents(agentId),
    };
    return { env: this.env, agentId, turn, slot };
  }

  /**
   * Transfers across shards in flight, kept in this object's storage (`xfer:<id>` → the sending
   * shard and when) with an alarm, so one a crash interrupts is driven again by `alarm`.
   */
  private intents(agentId: string): TransferIntents {
    const storage = this.ctx.storage;
    return {
      remember: async (id, from) => {
        await storage.put({ agentId, [`${INTENT}${id}`]: { from, at: Date.now() } satisfies Intent });
        await this.alarmBy(Date.now() + TRANSFER_RETRY_MS);
      },
      done: async (id) => {
        await storage.delete(`${INTENT}${id}`);
      },
    };
  }

  private async alarmBy(at: number): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null || at < current) await this.ctx.storage.setAlarm(at);
  }

  /**
   * Drives this agent's transfers across shards (`ids`, sent from `from`) in its turn, ordered with its
   * payments: the minute cron's backstop for a transfer no alarm finished.
   */
  resumeTransfers(from: number, ids: string[]) {
    return this.serialize(async () => {
      this.cache.forget();
      const states = [];
      // One transfer that cannot be driven now (its other shard down, say) does not hold the others.
      for (const id of ids) states.push((await this.driveOne(from, id))?.status ?? "pending");
      this.cache.forget();
      return states;
    });
  }

  /** Drives one transfer; a failure to read or write a shard is logged and leaves it to the next driver. */
  private async driveOne(from: number, id: string) {
    try {
      return await driveTransfer(this.env, from, id, this.faultContext());
    } catch (error) {
      log.warn("transfer_drive", { id, from, error });
      return null;
    }
  }

  private faultContext() {
    return { abort: () => this.ctx.abort("fault injection") };
  }

  /**
   * Drives every transfer this object remembers in flight. One whose send never landed is forgotten
   * once it is old enough that its batch cannot still be in the ledger's queue (the cron would find
   * it if it landed after all). Returns whether any is left to retry.
   */
  private async driveIntents(): Promise<boolean> {
    const intents = await this.ctx.storage.list<Intent>({ prefix: INTENT });
    if (intents.size === 0) return false;
    return this.serialize(async () => {
      this.cache.forget();
      let left = false;
      for (const [key, { from, at }] of intents) {
        const state = await this.driveOne(from, key.slice(INTENT.length));
        const over = state?.status === "completed" || state?.status === "reversed";
        if (over || (state?.status === "absent" && Date.now() - at > TRANSFER_RETRY_MS))
          await this.ctx.storage.delete(key);
        else left = true;
      }
      this.cache.forget();
      return left;
    });
  }

  /** A payment held for a human gets an alarm at its approval's expiry. */
  private async expiringHolds(agentId: string, operation: Promise<PayOutcome>): Promise<PayOutcome> {
    const outcome = await operation;
    if (outcome.kind === "approval") {
      await this.ctx.storage.put("agentId", agentId);
      const at = Date.parse(outcome.expiresAt);
      const current = await this.ctx.storage.getAlarm();
      if (current === null || at < current) await this.ctx.storage.setAlarm(at);
    }
    return outcome;
  }

  /**
   * Drives the transfers across shards this object has in flight, expires this agent's approvals
   * that are due, then sets the alarm for whichever comes next. Idempotent: firing twice decides
   * nothing twice (every step is guarded), and the minute cron sweeps whatever an alarm missed.
   */
  override async alarm(): Promise<void> {
    // Approvals expire even when a transfer's drive fails outright; the intents are retried either way.
    const left = await this.driveIntents().catch((error: unknown) => {
      log.warn("transfer_intents", { error });
      return true;
    });
    const retryAt = left ? Date.now() + TRANSFER_RETRY_MS : null;
    const nextExpiry = await this.expireApprovals();
    const next = Math.min(retryAt ?? Number.POSITIVE_INFINITY, nextExpiry ?? Number.POSITIVE_INFINITY);
    if (Number.isFinite(next)) await this.ctx.storage.setAlarm(next);
  }

  /** Expires this agent's approvals that are due; answers when the next one is. */
  private async expireApprovals(): Promise<number | null> {
    const agentId = await this.ctx.storage.get<string>("agentId");
    if (!agentId) return null;
    const now = nowIso();
    await this.env.DB.prepare(
      "UPDATE approvals SET status = 'expired', decided_at = ? WHERE agent_id = ? AND status = 'pending' AND expires_at <= ?",
    )
      .bind(now, agentId, now)
      .run();
    const next = await this.env.DB.prepare(
      "SELECT MIN(expires_at) AS next FROM approvals WHERE agent_id = ? AND status = 'pending'",
    )
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

  /** A write that must not land for a frozen agent (a PayLink grant): decided and written in one turn, so no freeze lands between. */
  writeUnlessFrozen(agentId: string, statements: SqlStatement[], shard = 0) {
    return this.serialize((endTurn) => writeUnlessFrozen(this.call(agentId, endTurn, undefined), statements, shard));
  }

  credit(agentId: string, amountMinor: number, reference: string | null, by: string, slot?: IdempotencySlot) {
    const credit: WalletCredit = { amountMinor, reference, by };
    return this.serialize(() => this.forgetting(creditWallet({ env: this.env, agentId, slot }, credit)));
  }

  /**
   * A merchant's refund of this agent's payment, the charge in the agent's shard: its plan (guarded
   * by the refunds service) committed on that shard's ledger in the agent's turn.
   */
  refund(plan: CommitPlan, shard = 0) {
    const commit = async (): Promise<CommitResult> => ledgerOf(this.env, shard).commit(plan);
    return this.serialize(() => this.forgetting(commit()));
  }

  /**
   * A refund of this agent's payment whose charge lives in shard `from`, not the agent's: the
   * refund and its send (`plan`, P1) on `from`, then its arrival in this agent's shard, in the
   * agent's turn (see refundAcrossShards).
   */
  refundAcrossShards(agentId: string, from: number, id: string, plan: CommitPlan) {
    const refund = { env: this.env, intents: this.intents(agentId), context: this.faultContext() };
    return this.serialize(() => this.forgetting(refundAcrossShards(refund, from, id, plan)));
  }

  creditDeposit(transfer: DepositTransfer, credit: boolean) {
    return this.serialize(() => this.forgetting(creditDeposit(this.env, transfer, credit)));
  }

  setPolicy(agentId: string, policy: Policy) {
    return this.serialize(() => this.forgetting(setPolicy(this.env, agentId, policy)));
  }

  /** A freeze takes its turn between payments; decisions after it read the frozen agent from D1. */
  setFrozen(agentId: string, frozen: boolean, reason: string | null, by: string) {
    return this.serialize(() => this.forgetting(setFrozen(this.env, agentId, frozen, reason, by)));
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

/** Storage key prefix of a transfer in flight. */
const INTENT = "xfer:";
interface Intent {
  from: number;
  at: number;
}
/** How long a transfer in flight waits before the alarm drives it again. */
const TRANSFER_RETRY_MS = 30_000;

export const walletOf = (env: Env, agentId: string) => env.WALLET.getByName(agentId);
