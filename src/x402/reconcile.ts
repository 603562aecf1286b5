import { isAddressEqual, parseEventLogs } from "viem";
import type { Env, X402Settings } from "../env";
import { settingsOf } from "../env";
import { getCharge } from "../charges/service";
import { dbOf } from "../db/client";
import { nowIso } from "../lib/time";
import { EIP3009_ABI, publicClientOf } from "./chain";
import { credit, release } from "./service";

/** How far back to look for the transaction that used an authorization when we never learned its hash. */
const LOG_LOOKBACK_BLOCKS = 50_000n;
/** A payment still `settling` this long after its last update lost its worker (a crash mid-settlement). */
const STALE_SETTLING_MS = 5 * 60_000;

export interface OpenPayment {
  id: string;
  chargeId: string;
  payer: `0x${string}`;
  nonce: `0x${string}`;
  value: string;
  validBefore: number;
  txHash: `0x${string}` | null;
}

export type Reconciliation = "credited" | "failed" | "waiting";

/**
 * Settles the fate of a payment whose outcome was lost, from the chain alone:
 * if the token marks the authorization used and a Transfer of the agreed value
 * from the payer to our address exists, the charge is credited (once: the
 * credit batch requires the payment to be still open); if the authorization is
 * unused and has expired, nothing can ever move and the claim is released.
 */
export async function reconcilePayment(env: Env, x: X402Settings, p: OpenPayment, nowSeconds = Math.floor(Date.now() / 1000)): Promise<Reconciliation> {
  const client = publicClientOf(x);
  const used = await client.readContract({ address: x.asset, abi: EIP3009_ABI, functionName: "authorizationState", args: [p.payer, p.nonce] });
  if (!used) {
    if (p.validBefore <= nowSeconds) {
      await release(env, p.id, p.chargeId, "authorization_expired_unused", nowIso());
      return "failed";
    }
    return "waiting";
  }
  let transaction = p.txHash;
  if (!transaction) {
    const head = await client.getBlockNumber();
    const logs = await client.getContractEvents({
      address: x.asset,
      abi: EIP3009_ABI,
      eventName: "AuthorizationUsed",
      args: { authorizer: p.payer, nonce: p.nonce },
      fromBlock: head > LOG_LOOKBACK_BLOCKS ? head - LOG_LOOKBACK_BLOCKS : 0n,
      toBlock: head,
    });
    transaction = logs[0]?.transactionHash ?? null;
    if (!transaction) return "waiting";
  }
  const receipt = await client.getTransactionReceipt({ hash: transaction });
  const transfers = parseEventLogs({ abi: EIP3009_ABI, eventName: "Transfer", logs: receipt.logs.filter((l) => isAddressEqual(l.address, x.asset)) });
  const paid = receipt.status === "success" && transfers.some((t) => isAddressEqual(t.args.from, p.payer) && isAddressEqual(t.args.to, x.payTo) && t.args.value === BigInt(p.value));
  if (!paid) {
    // Used by someone else's transaction that did not pay us (e.g. cancelled): nothing was received.
    await release(env, p.id, p.chargeId, "authorization_used_without_transfer", nowIso());
    return "failed";
  }
  const charge = await getCharge(dbOf(env.DB), p.chargeId);
  if (!charge) return "waiting";
  await credit(env, x, charge, p.id, p.payer.toLowerCase(), transaction);
  return "credited";
}

/** The cron's sweep over payments whose outcome is unknown or whose worker vanished. */
export async function reconcileOpenPayments(env: Env, now = Date.now()): Promise<Record<Reconciliation, number>> {
  const x = settingsOf(env).x402;
  const counts: Record<Reconciliation, number> = { credited: 0, failed: 0, waiting: 0 };
  if (!x) return counts;
  const open = await env.DB.prepare(
    `SELECT id, charge_id AS chargeId, payer, nonce, value, valid_before AS validBefore, tx_hash AS txHash FROM x402_payments
     WHERE status = 'unknown' OR (status = 'settling' AND updated_at <= ?) ORDER BY updated_at LIMIT 50`,
  ).bind(nowIso(now - STALE_SETTLING_MS)).all<OpenPayment>();
  for (const payment of open.results) {
    try {
      counts[await reconcilePayment(env, x, payment)]++;
    } catch (error) {
      counts.waiting++;
      console.error(JSON.stringify({ level: "warn", where: "x402_reconcile", paymentId: payment.id, error: String(error).slice(0, 300) }));
    }
  }
  return counts;
}
