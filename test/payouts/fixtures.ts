import { env } from "cloudflare:workers";
import { erc20Abi, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import { settingsOf } from "../../src/config/env";
import { outboundNonce } from "../../src/outbound/authorization";
import { api } from "../helpers/api";
import { createAgent, createCharge, createMerchant, payCharge } from "../helpers/factories";
import { waitFor } from "../helpers/wait";
import { chain, publicClient, TOKEN_ABI } from "../helpers/x402";

/** The Worker's settings for sending money out (the settlement address and its key, the gas keys). */
export const treasury = () => settingsOf(env).x402!;

/** A merchant with `cents` earned from an agent's wallet payment, and a fresh payout address. */
export async function fundedMerchant(cents: number) {
  const merchant = await createMerchant({ name: "Payout Co" });
  const agent = await createAgent({ credit: cents });
  const charge = await createCharge(merchant.apiKey, cents);
  const paid = await payCharge(agent.apiKey, charge.chargeId);
  expect(paid.status, paid.text).toBe(200);
  const address = privateKeyToAccount(generatePrivateKey()).address;
  const set = await api("PUT", "/merchant/payout-address", { token: merchant.apiKey, body: { address } });
  expect(set.status).toBe(200);
  return { ...merchant, address, agent, chargeId: charge.chargeId };
}

export const payoutOf = (merchantKey: string, payoutId: string) =>
  api("GET", `/merchant/payouts/${payoutId}`, { token: merchantKey }).then((r) => r.body.payout);

/** Waits until the payout is decided (paid or failed). */
export const settled = (merchantKey: string, payoutId: string, timeoutMs?: number) =>
  waitFor(
    `payout ${payoutId}`,
    () => payoutOf(merchantKey, payoutId),
    (p) => p.status !== "pending",
    timeoutMs,
  );

/** Every token Transfer from the settlement address to `to` on the chain, oldest first. */
export async function transfersTo(to: Hex) {
  const logs = await publicClient().getContractEvents({
    address: chain().token,
    abi: erc20Abi,
    eventName: "Transfer",
    args: { from: treasury().payTo, to },
    fromBlock: 0n,
  });
  return logs.map((l) => ({ transaction: l.transactionHash, value: l.args.value! }));
}

/** Counts rows of `sql` (a `SELECT COUNT(*) AS n ...`). */
export async function count(sql: string, ...params: (string | number)[]): Promise<number> {
  const row = await env.DB.prepare(sql)
    .bind(...params)
    .first<{ n: number }>();
  return row!.n;
}

/** How many outbox events of `type` name the payout. */
export const outboxEventsOf = (type: string, payoutId: string) =>
  count(
    "SELECT COUNT(*) AS n FROM outbox_events WHERE type = ? AND json_extract(data, '$.payoutId') = ?",
    type,
    payoutId,
  );

/** The ledger entries of a payout's debit and of its reversal, if any. */
export async function payoutEntries(payoutId: string) {
  const rows = await env.DB.prepare(
    "SELECT transfer_id AS transferId, account, amount_minor AS amountMinor FROM ledger_entries WHERE transfer_id IN (?, ?) ORDER BY rowid",
  )
    .bind(payoutId, `${payoutId}:reversal`)
    .all<{ transferId: string; account: string; amountMinor: number }>();
  return rows.results;
}

/** The merchant's cached balance and the sum of its ledger entries, which must agree. */
export async function merchantLedger(merchantId: string) {
  const cached = await count("SELECT balance_minor AS n FROM merchants WHERE id = ?", merchantId);
  const entries = await count(
    "SELECT COALESCE(SUM(amount_minor), 0) AS n FROM ledger_entries WHERE account = ?",
    `merchant:${merchantId}`,
  );
  return { cached, entries };
}

/** Whether the token marks the payout's authorization used (its nonce is derived from the payout's id). */
export const authorizationUsed = (payoutId: string) =>
  publicClient().readContract({
    address: chain().token,
    abi: TOKEN_ABI,
    functionName: "authorizationState",
    args: [treasury().payTo, outboundNonce("payout", payoutId)],
  });
