import { DurableObject } from "cloudflare:workers";
import { type Hex, keccak256 } from "viem";
import { receiptWithin, rpcCall, shortError } from "../chain/client";
import type { Env, X402Settings } from "../config/env";
import { settingsOf } from "../config/env";
import { type Place, placementOf } from "../ledger/place";
import { faultPoint } from "../lib/faults";
import { log } from "../lib/log";
import { serialQueue } from "../lib/serial";
import { nowIso } from "../lib/time";
import { type BatchedAuthorization, batchTransfer, outcomesIn } from "./batch";
import { OPEN_PAYMENT_SELECT, type OpenPayment, reconcilePayment } from "./reconcile";
import { gasAccountOf, type PreparedTransfer, type SettleOutcome } from "./transfer";

/** How long after an unknown outcome the settler looks at the chain again, and between later looks. */
export const RECONCILE_AFTER_MS = 15_000;
const PENDING = "pending:";

type Ready = PreparedTransfer & { x: X402Settings; account: ReturnType<typeof gasAccountOf> };

/** A signed transaction that was not handed to the node because the one before it failed. */
class EarlierSendFailed extends Error {}

export type BroadcastResult =
  | { kind: "sent"; transaction: `0x${string}` }
  | { kind: "rejected"; reason: string }
  | { kind: "unknown"; reason: string };

/**
 * The built-in facilitator's gas-paying account, one object per key (a lane:
 * FACILITATOR_PRIVATE_KEY may name several, and settlements are spread over
 * them, since one key's sends are one at a time). Nonces
 * are assigned and transactions signed here one at a time, so they are in
 * order without gaps or reuse. Each signed transaction is handed to the node
 * once the node has answered for the one before it: concurrent sends could
 * arrive out of nonce order, and a node may then hold the later ones back for
 * good (anvil does; docs/decisions.md, x402). Waiting for receipts happens outside,
 * so throughput is bounded by the chain, not by this queue.
 */
export class X402SettlerDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();
  /** Settlements waiting for the next batch, each with the caller waiting for its outcome. */
  private waiting: { item: BatchedAuthorization; answer: (outcome: SettleOutcome) => void }[] = [];
  /** A batch is on its way to the node: the ones arriving meanwhile wait to go in the next. */
  private batching = false;
  private nextNonce: number | null = null;
  /** Transactions handed to the node whose answer has not come back yet. */
  private readonly sending = new Set<Promise<`0x${string}`>>();
  /** The latest send; the next goes to the node only once this one was answered, and only if it was taken. */
  private lastSend: Promise<unknown> = Promise.resolve();

  /**
   * Takes its turn to get the next nonce for a transfer checked before (`checkTransfer`: its gas
   * estimate ran it, the fees are current) and sign it; the turn ends once the signed transaction
   * is queued for the node, so the next one is signed while this one travels.
   */
  async broadcast(prepared: PreparedTransfer, gasAddress: Hex): Promise<BroadcastResult> {
    const x = settingsOf(this.env).x402;
    const key = x?.facilitatorPrivateKeys.find((k) => gasAccountOf(k).address === gasAddress);
    if (!x || !key) return { kind: "rejected", reason: "facilitator_not_configured" };
    // This object's nonce count is its own key's (its name says which): a call for another key, or to
    // the watcher, is a bug and never a send, since two senders for one key would reuse its nonces.
    if (this.ctx.id.name !== laneName(gasAddress)) {
      log.error("x402_settler", { error: `${this.ctx.id.name ?? "(unnamed)"} asked to send for ${gasAddress}` });
      return { kind: "rejected", reason: "settler_lane_mismatch" };
    }
    const ready: Ready = { x, account: gasAccountOf(key), ...prepared };
    for (let attempt = 0; ; attempt++) {
      const sent = await this.serialize((endTurn) => this.send(ready, endTurn));
      if (sent.kind !== "send_again") return sent;
      // Nothing was broadcast (another sender took the nonce, or the send before this one failed): again,
      // with a fresh nonce; after four tries, a definitive failure, since none of them left.
      if (attempt === 3) return { kind: "rejected", reason: `broadcast_failed: ${sent.reason}` };
    }
  }

  /**
   * Settles one checked authorization in the next batch of this lane (X402_SETTLEMENT_BATCH_ADDRESS)
   * and answers its own outcome once the batch's transaction is mined. A lane has one batch on the
   * chain at a time: the next leaves as soon as the one before it is mined (or its outcome is known
   * to be unknown), and holds whatever arrived meanwhile. So batches grow with the load, and a lone
   * settlement on an idle lane leaves at once, never waiting for company.
   */
  async settleInBatch(item: BatchedAuthorization, gasAddress: Hex): Promise<SettleOutcome> {
    const x = settingsOf(this.env).x402;
    if (!x?.settlementBatch) return { kind: "failed", reason: "settlement_batch_not_configured" };
    const outcome = new Promise<SettleOutcome>((answer) => this.waiting.push({ item, answer }));
    if (!this.batching) void this.sendBatches(x, x.settlementBatch.max, gasAddress);
    return outcome;
  }

  /** Sends the waiting settlements in batches of at most `max`, one after another, until none waits. */
  private async sendBatches(x: X402Settings, max: number, gasAddress: Hex): Promise<void> {
    this.batching = true;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, max);
        const items = batch.map((w) => w.item);
        let sent: BroadcastResult | null = null;
        let outcomes: SettleOutcome[];
        const abort = () => this.ctx.abort("fault injection");
        try {
          faultPoint("settle.before_send", { abort });
          try {
            sent = await this.broadcast(batchTransfer(x, items), gasAddress);
          } catch (error) {
            sent = { kind: "unknown", reason: `broadcast_error: ${shortError(error)}` };
          }
          faultPoint("settle.after_send", { abort });
          // Its receipt answers each settlement of this batch; the ones arriving meanwhile wait for the next.
          outcomes = await this.outcomesOf(x, sent, items);
        } catch (error) {
          // Whatever failed here, the batch may have left: the chain decides each of its payments.
          const transaction = sent?.kind === "sent" ? sent.transaction : null;
          outcomes = items.map(() => ({
            kind: "unknown",
            reason: `settler_failed: ${shortError(error)}`,
            transaction,
          }));
        }
        for (const [i, w] of batch.entries()) w.answer(outcomes[i]!);
      }
    } finally {
      this.batching = false;
    }
  }

  /** Each item's outcome from its batch's transaction (one receipt read for all of them). */
  private async outcomesOf(x: X402Settings, sent: BroadcastResult, items: BatchedAuthorization[]) {
    const all = (outcome: SettleOutcome) => items.map(() => outcome);
    if (sent.kind === "rejected") return all({ kind: "failed", reason: sent.reason });
    if (sent.kind === "unknown") return all({ kind: "unknown", reason: sent.reason, transaction: null });
    try {
      return outcomesIn(x, await receiptWithin(x, sent.transaction, x.facilitatorTimeoutMs), items);
    } catch (error) {
      return all({
        kind: "unknown",
        reason: `receipt_unavailable: ${shortError(error)}`,
        transaction: sent.transaction,
      });
    }
  }

  /**
   * Keeps a settlement whose outcome is unknown until the chain has decided it:
   * the alarm reconciles it (credited once, or released) without waiting for
   * the minute cron, which stays as the backstop.
   */
  async watch(paymentId: string, at = Date.now() + RECONCILE_AFTER_MS): Promise<void> {
    await this.ctx.storage.put(`${PENDING}${paymentId}`, true);
    const current = await this.ctx.storage.getAlarm();
    if (current === null || at < current) await this.ctx.storage.setAlarm(at);
  }

  /**
   * Reconciles every watched settlement that is still open. Idempotent: one
   * already decided (by an earlier alarm, the cron or the request itself) is
   * only forgotten, since crediting requires the payment to be still open and
   * releasing is guarded by status. Ones the chain has not decided yet are
   * looked at again later.
   */
  override async alarm(): Promise<void> {
    const x = settingsOf(this.env).x402;
    const watched = [...(await this.ctx.storage.list({ prefix: PENDING })).keys()].map((key) =>
      key.slice(PENDING.length),
    );
    if (!x || watched.length === 0) return;
    // A payment lives in its charge's place, which its id names: each place is read for its own.
    const byPlace = new Map<Place, string[]>();
    for (const id of watched) {
      const at = placementOf(this.env).ofId(id);
      if (at) byPlace.set(at, [...(byPlace.get(at) ?? []), id]);
    }
    const open = (
      await Promise.all(
        [...byPlace].map(([{ db }, ids]) =>
          db
            .prepare(
              `${OPEN_PAYMENT_SELECT}
       WHERE id IN (SELECT value FROM json_each(?)) AND status IN ('unknown', 'settling')`,
            )
            .bind(JSON.stringify(ids))
            .all<OpenPayment>(),
        ),
      )
    ).flatMap((r) => r.results);
    const stillOpen = new Set<string>();
    for (const payment of open) {
      try {
        if ((await reconcilePayment(this.env, x, payment)) === "waiting") stillOpen.add(payment.id);
      } catch (error) {
        stillOpen.add(payment.id);
        log.warn("x402_settler_alarm", { paymentId: payment.id, at: nowIso(), error });
      }
    }
    await this.ctx.storage.delete(watched.filter((id) => !stillOpen.has(id)).map((id) => `${PENDING}${id}`));
    if (stillOpen.size > 0) await this.ctx.storage.setAlarm(Date.now() + RECONCILE_AFTER_MS);
  }

  /**
   * Signs the transfer with the next nonce and hands it to the node after the transaction before
   * it was taken (the chain id is configured, gas and fees were estimated before the turn). After
   * any failure the nonce is read from the node again, once every send in flight has been
   * answered, so the count includes all the node took; the sends already signed behind the failed
   * one are never handed over (they would leave a gap) and go again with fresh nonces.
   */
  private async send(
    { x, account, to, data, gas, fees }: Ready,
    endTurn: () => void,
  ): Promise<BroadcastResult | { kind: "send_again"; reason: string }> {
    /** The signed transaction, once it is on its way to the node. */
    let handedOver: `0x${string}` | null = null;
    try {
      if (this.nextNonce === null) {
        await Promise.allSettled([...this.sending]);
        const count = await rpcCall<unknown>(x, "eth_getTransactionCount", [account.address, "pending"], {
          retry: true,
        });
        // A count that is not a number is no nonce to sign with: nothing is sent (a definitive failure below).
        if (typeof count !== "string" || !/^0x[0-9a-f]+$/i.test(count))
          throw new Error(`eth_getTransactionCount answered ${String(count).slice(0, 40)}`);
        this.nextNonce = Number.parseInt(count, 16);
        this.lastSend = Promise.resolve();
      }
      const nonce = this.nextNonce;
      const signed = await account.signTransaction({
        type: "eip1559",
        chainId: x.chainId,
        to: to ?? x.asset,
        data,
        gas: (gas * 12n) / 10n,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        nonce,
      });
      const sending = this.lastSend.then(
        () => {
          handedOver = signed;
          // Never retried (rpcCall never is): a retry of a send the node took answers "nonce too low".
          return rpcCall<`0x${string}`>(x, "eth_sendRawTransaction", [signed]);
        },
        () => Promise.reject(new EarlierSendFailed("an earlier transaction was not taken")),
      );
      this.lastSend = sending;
      // Unless a failed send meanwhile asked for the count to be read again.
      if (this.nextNonce === nonce) this.nextNonce = nonce + 1;
      this.sending.add(sending);
      endTurn();
      try {
        return { kind: "sent", transaction: await sending };
      } finally {
        this.sending.delete(sending);
      }
    } catch (error) {
      this.nextNonce = null;
      if (error instanceof EarlierSendFailed) return { kind: "send_again", reason: error.message };
      // Nothing reached the node (the nonce could not be read, or signing failed): a definitive failure.
      if (!handedOver) return { kind: "rejected", reason: `broadcast_failed: ${shortError(error)}` };
      if (/nonce.*(too low|lower than)/i.test(String(error))) {
        // The nonce is used, by another sender or by this very transaction (an answer lost on the way):
        // only the node can tell which, and sending this transfer again would pay it twice.
        const hash = keccak256(handedOver);
        const known = await rpcCall(x, "eth_getTransactionByHash", [hash], { retry: true }).catch(() => undefined);
        if (known) return { kind: "sent", transaction: hash };
        if (known === null) return { kind: "send_again", reason: shortError(error) };
      }
      // Otherwise the node may or may not have taken it: reconciliation decides.
      return { kind: "unknown", reason: `broadcast_error: ${shortError(error)}` };
    }
  }
}

/** The object that watches settlements whose outcome is unknown (it sends nothing). */
export const settlerOf = (env: Env) => env.X402_SETTLER.getByName("settler");

const laneName = (gasAddress: Hex) => `lane:${gasAddress.toLowerCase()}`;

/** The settlement lane of one gas key. */
export const laneOf = (env: Env, gasAddress: Hex) => env.X402_SETTLER.getByName(laneName(gasAddress));
