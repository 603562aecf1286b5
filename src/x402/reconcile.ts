import { encodeEventTopics, isAddressEqual, parseEventLogs, toHex } from "viem";
import type { Env, X402Settings } from "../env";
import { settingsOf } from "../env";
import { getCharge } from "../charges/service";
import { dbOf } from "../db/client";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";
import { authorizationUsed, EIP3009_ABI, receiptNow, rpcCall } from "../chain/client";
import { CLOCK_SKEW_SECONDS } from "./verify";
import { credit, release } from "./settlement";

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
  /** The receiving address the authorization pays; null on rows from before those: the settlement address. */
  payTo: `0x${string}` | null;
}

export type Reconciliation = "credited" | "failed" | "waiting";

/** The columns of an x402 payment that reconciliation reads, as an OpenPayment. */
export const OPEN_PAYMENT_SELECT =
  "SELECT id, charge_id AS chargeId, payer, nonce, value, valid_before AS validBefore, tx_hash AS txHash, pay_to AS payTo FROM x402_payments";

/**
 * Settles the fate of a payment whose outcome was lost or reported failed, from the chain alone:
 * if the token marks the authorization used and the transaction that used it moved the agreed
 * value from the payer to our address, the charge is credited with that transaction (once: the
 * credit batch requires the payment to be still open); if it is unused and expired, nothing can
 * ever move and the claim is released. The transaction the payment names is only a hint: someone
 * else may have submitted the authorization first (the funds still go to the signed `to`), and
 * then ours reverted; the token's AuthorizationUsed log names the one that used it.
 */
export async function reconcilePayment(
  env: Env,
  x: X402Settings,
  p: OpenPayment,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<Reconciliation> {
  if (!(await authorizationUsed(x, p.payer, p.nonce))) {
    // Our clock may run ahead of the chain's: a transaction still waiting could land in a block
    // stamped before validBefore, so expiry waits out the skew the checks tolerate.
    if (p.validBefore + CLOCK_SKEW_SECONDS <= nowSeconds) {
      await release(env, p.id, p.chargeId, "authorization_expired_unused", nowIso());
      return "failed";
    }
    return "waiting";
  }
  let receipt = p.txHash ? await receiptNow(x, p.txHash) : null;
  if (!receipt || !paysUs(x, p, receipt)) {
    const fate = await fateOnChain(x, p);
    if (fate.kind === "canceled") {
      await release(env, p.id, p.chargeId, "authorization_canceled", nowIso());
      return "failed";
    }
    if (fate.kind === "unseen") return "waiting";
    if (fate.transaction !== receipt?.transactionHash) receipt = await receiptNow(x, fate.transaction);
    if (!receipt) return "waiting";
  }
  if (!paysUs(x, p, receipt)) {
    // The transaction that used it moved nothing to us (another recipient's authorization cannot
    // share this nonce, so this is a token that behaves otherwise): nothing was received.
    await release(env, p.id, p.chargeId, "authorization_used_without_transfer", nowIso());
    return "failed";
  }
  const charge = await getCharge(dbOf(env.DB), p.chargeId);
  if (!charge) return "waiting";
  await credit(env, x, charge, p.id, p.payer.toLowerCase(), receipt.transactionHash);
  return "credited";
}

type Receipt = NonNullable<Awaited<ReturnType<typeof receiptNow>>>;

/** Did this transaction move the payment's value from its payer to the address it pays? */
function paysUs(x: X402Settings, p: OpenPayment, receipt: Receipt): boolean {
  if (receipt.status !== "success") return false;
  const transfers = parseEventLogs({
    abi: EIP3009_ABI,
    eventName: "Transfer",
    logs: receipt.logs.filter((l) => isAddressEqual(l.address, x.asset)),
  });
  return transfers.some(
    (t) =>
      isAddressEqual(t.args.from, p.payer) &&
      isAddressEqual(t.args.to, p.payTo ?? x.payTo) &&
      t.args.value === BigInt(p.value),
  );
}

/**
 * What the token's logs say became of a used authorization: the transaction that used it
 * (AuthorizationUsed), a cancellation by the payer (AuthorizationCanceled, USDC's
 * `cancelAuthorization`), or nothing in reach yet (a node whose logs lag its state).
 */
async function fateOnChain(
  x: X402Settings,
  p: OpenPayment,
): Promise<{ kind: "used"; transaction: `0x${string}` } | { kind: "canceled" } | { kind: "unseen" }> {
  const [usedTopic, authorizer, nonce] = encodeEventTopics({
    abi: EIP3009_ABI,
    eventName: "AuthorizationUsed",
    args: { authorizer: p.payer, nonce: p.nonce },
  });
  const [canceledTopic] = encodeEventTopics({ abi: EIP3009_ABI, eventName: "AuthorizationCanceled" });
  const head = BigInt(await rpcCall<string>(x, "eth_blockNumber", [], { retry: true }));
  const fromBlock = head > LOG_LOOKBACK_BLOCKS ? head - LOG_LOOKBACK_BLOCKS : 0n;
  const logs = await rpcCall<{ topics: string[]; transactionHash: `0x${string}` }[]>(
    x,
    "eth_getLogs",
    [
      {
        address: x.asset,
        fromBlock: toHex(fromBlock),
        toBlock: toHex(head),
        topics: [[usedTopic, canceledTopic], authorizer, nonce],
      },
    ],
    { retry: true },
  );
  const used = logs.find((log) => log.topics[0] === usedTopic);
  if (used) return { kind: "used", transaction: used.transactionHash };
  return logs.length > 0 ? { kind: "canceled" } : { kind: "unseen" };
}

/** The cron's sweep over payments whose outcome is unknown or whose worker vanished. */
export async function reconcileOpenPayments(env: Env, now = Date.now()): Promise<Record<Reconciliation, number>> {
  const x = settingsOf(env).x402;
  const counts: Record<Reconciliation, number> = { credited: 0, failed: 0, waiting: 0 };
  if (!x) return counts;
  const open = await env.DB.prepare(
    `${OPEN_PAYMENT_SELECT}
     WHERE status = 'unknown' OR (status = 'settling' AND updated_at <= ?) ORDER BY updated_at LIMIT 50`,
  )
    .bind(nowIso(now - STALE_SETTLING_MS))
    .all<OpenPayment>();
  for (const payment of open.results) {
    try {
      counts[await reconcilePayment(env, x, payment)]++;
    } catch (error) {
      counts.waiting++;
      log.warn("x402_reconcile", { paymentId: payment.id, error });
    }
  }
  return counts;
}
