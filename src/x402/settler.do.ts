import { DurableObject } from "cloudflare:workers";
import { encodeFunctionData, parseSignature, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Env, X402Settings } from "../env";
import { settingsOf } from "../env";
import { serialQueue } from "../lib/serial";
import { EIP3009_ABI, publicClientOf } from "./chain";
import type { Authorization } from "./payload";
import { nowIso } from "../lib/time";
import { reconcilePayment, type OpenPayment } from "./reconcile";

/** How long after an unknown outcome the settler looks at the chain again, and between later looks. */
export const RECONCILE_AFTER_MS = 15_000;
const PENDING = "pending:";
/** How long one fee estimate serves the settlements that follow it. */
const FEES_FRESH_MS = 2_000;

interface Prepared {
  kind: "ready";
  x: X402Settings;
  account: ReturnType<typeof privateKeyToAccount>;
  /** The encoded `transferWithAuthorization` call. */
  data: `0x${string}`;
  gas: bigint;
  /** Fees estimated with the checks (or shortly before), so the one-at-a-time send makes no fee round trips. */
  fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
}

export type BroadcastResult =
  | { kind: "sent"; transaction: `0x${string}` }
  | { kind: "rejected"; reason: string }
  | { kind: "unknown"; reason: string };

/**
 * The built-in facilitator's gas-paying account, one object per key. Nonces
 * are assigned and transactions signed here one at a time, so they are in
 * order without gaps or reuse; the broadcasts themselves overlap, and waiting
 * for receipts happens outside, so throughput is bounded by the chain, not by
 * this queue.
 */
export class X402SettlerDurableObject extends DurableObject<Env> {
  private readonly serialize = serialQueue();
  private nextNonce: number | null = null;
  /** Transactions handed to the node whose answer has not come back yet. */
  private readonly sending = new Set<Promise<`0x${string}`>>();
  private fees: { at: number; estimate: Promise<Prepared["fees"]> } | null = null;

  /**
   * Checks the transfer (its gas estimate runs it; side by side with other
   * settlements: they are reads), then takes its turn to get the next nonce
   * and be signed; the turn ends once the signed transaction is on its way,
   * so sends overlap but leave in nonce order, without gaps or reuse.
   */
  async broadcast(authorization: Authorization, signature: `0x${string}`): Promise<BroadcastResult> {
    const prepared = await this.prepare(authorization, signature);
    if (prepared.kind !== "ready") return prepared;
    for (let attempt = 0; ; attempt++) {
      const sent = await this.serialize((endTurn) => this.send(prepared, endTurn));
      if (sent.kind !== "nonce_taken") return sent;
      // The node refused the nonce (another sender used it): nothing was broadcast, so send again with a fresh one.
      if (attempt === 3) return { kind: "unknown", reason: `broadcast_error: ${sent.reason}` };
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
    const watched = [...(await this.ctx.storage.list({ prefix: PENDING })).keys()].map((key) => key.slice(PENDING.length));
    if (!x || watched.length === 0) return;
    const open = await this.env.DB.prepare(
      `SELECT id, charge_id AS chargeId, payer, nonce, value, valid_before AS validBefore, tx_hash AS txHash FROM x402_payments
       WHERE id IN (SELECT value FROM json_each(?)) AND status IN ('unknown', 'settling')`,
    ).bind(JSON.stringify(watched)).all<OpenPayment>();
    const stillOpen = new Set<string>();
    for (const payment of open.results) {
      try {
        if ((await reconcilePayment(this.env, x, payment)) === "waiting") stillOpen.add(payment.id);
      } catch (error) {
        stillOpen.add(payment.id);
        console.error(JSON.stringify({ level: "warn", where: "x402_settler_alarm", paymentId: payment.id, at: nowIso(), error: String(error).slice(0, 300) }));
      }
    }
    await this.ctx.storage.delete(watched.filter((id) => !stillOpen.has(id)).map((id) => `${PENDING}${id}`));
    if (stillOpen.size > 0) await this.ctx.storage.setAlarm(Date.now() + RECONCILE_AFTER_MS);
  }

  private async prepare(a: Authorization, signature: `0x${string}`): Promise<Prepared | Exclude<BroadcastResult, { kind: "sent" }>> {
    const x = settingsOf(this.env).x402;
    if (!x?.facilitatorPrivateKey) return { kind: "rejected", reason: "facilitator_not_configured" };
    const account = privateKeyToAccount(x.facilitatorPrivateKey);
    const client = publicClientOf(x);
    let parts: { v?: bigint; yParity?: number; r: `0x${string}`; s: `0x${string}` };
    try {
      parts = parseSignature(signature);
    } catch {
      return { kind: "rejected", reason: "invalid_exact_evm_payload_signature" };
    }
    const v = Number(parts.v ?? BigInt((parts.yParity ?? 0) + 27));
    const args = [a.from as `0x${string}`, a.to as `0x${string}`, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as `0x${string}`, v, parts.r, parts.s] as const;
    // Estimating the gas runs the transfer against the latest state: one that would revert is refused
    // here, before anything is broadcast. Fees are shared by the settlements of the next moment.
    try {
      const [gas, fees] = await Promise.all([
        client.estimateContractGas({ account, address: x.asset, abi: EIP3009_ABI, functionName: "transferWithAuthorization", args }),
        this.currentFees(client),
      ]);
      return { kind: "ready", x, account, data: encodeFunctionData({ abi: EIP3009_ABI, functionName: "transferWithAuthorization", args }), gas, fees };
    } catch (error) {
      return { kind: "rejected", reason: `simulation_failed: ${shortError(error)}` };
    }
  }

  /**
   * The fee estimate, reused for FEES_FRESH_MS: the estimate leaves headroom over the base
   * fee (viem's 1.2x), which a block or two cannot outgrow, and it costs a block read each time.
   */
  private currentFees(client: PublicClient): Promise<Prepared["fees"]> {
    const now = Date.now();
    if (this.fees && now - this.fees.at < FEES_FRESH_MS) return this.fees.estimate;
    const estimate = client.estimateFeesPerGas().then(({ maxFeePerGas, maxPriorityFeePerGas }) => ({ maxFeePerGas, maxPriorityFeePerGas }));
    this.fees = { at: now, estimate };
    estimate.catch(() => {
      if (this.fees?.estimate === estimate) this.fees = null;
    });
    return estimate;
  }

  /**
   * Signs the transfer with the next nonce and broadcasts it (the chain id is configured, gas
   * and fees were estimated before the turn). The turn ends as soon as the transaction is
   * handed to the node, so the next one is signed while this one travels. After any failure
   * the nonce is read from the node again, once every send in flight has been answered, so
   * the count includes all the node took.
   */
  private async send({ x, account, data, gas, fees }: Prepared, endTurn: () => void): Promise<BroadcastResult | { kind: "nonce_taken"; reason: string }> {
    const client = publicClientOf(x);
    try {
      if (this.nextNonce === null) {
        await Promise.allSettled([...this.sending]);
        this.nextNonce = await client.getTransactionCount({ address: account.address, blockTag: "pending" });
      }
      const nonce = this.nextNonce;
      const serializedTransaction = await account.signTransaction({
        type: "eip1559",
        chainId: x.chainId,
        to: x.asset,
        data,
        gas: (gas * 12n) / 10n,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        nonce,
      });
      const sending = client.sendRawTransaction({ serializedTransaction });
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
      if (/nonce.*(too low|lower than)/i.test(String(error))) return { kind: "nonce_taken", reason: shortError(error) };
      // Otherwise the node may or may not have taken it: reconciliation decides.
      return { kind: "unknown", reason: `broadcast_error: ${shortError(error)}` };
    }
  }
}

export function shortError(error: unknown): string {
  const text = error instanceof Error ? ((error as { shortMessage?: string }).shortMessage ?? error.message) : String(error);
  return text.split("\n")[0]!.slice(0, 200);
}

export const settlerOf = (env: Env) => env.X402_SETTLER.getByName("settler");
