import type { Env, X402Settings } from "../config/env";
import { placementOf } from "../ledger/place";
import { type ProtocolReason, protocolReason } from "./reasons";
import { caip2 } from "./terms";

/**
 * The settlement status resource: what became of one x402 payment, for a client that lost the
 * answer (a 202, a dropped connection) and must learn the outcome without paying again. Its id is
 * the payment's own (`xpay_` and 120 random bits), so knowing it is the capability to read it.
 */
export interface SettlementView {
  settlementId: string;
  status: "pending" | "settled" | "failed";
  chargeId: string;
  network: string;
  payer: string;
  transaction: string | null;
  errorReason: ProtocolReason | null;
}

interface SettlementRow {
  id: string;
  chargeId: string;
  network: string;
  payer: string;
  status: string;
  txHash: string | null;
  error: string | null;
}

const SETTLEMENT_SELECT =
  "SELECT id, charge_id AS chargeId, network, payer, status, tx_hash AS txHash, error FROM x402_payments";

/** Where a client asks after a settlement whose outcome it does not know (the 202's Location). */
export const settlementPath = (settlementId: string) => `/x402/settlements/${settlementId}`;

/**
 * A payment row as the resource shows it. `settling` (in flight) and `unknown` (left to the chain
 * to decide) are both `pending`; a failed one names why in the protocol's words. The network is
 * the CAIP-2 id, as x402 version 2 names it.
 */
function settlementView(x: X402Settings, row: SettlementRow): SettlementView {
  const status = row.status === "settled" ? "settled" : row.status === "failed" ? "failed" : "pending";
  return {
    settlementId: row.id,
    status,
    chargeId: row.chargeId,
    network: row.network === x.network ? caip2(x.chainId) : row.network,
    payer: row.payer,
    transaction: row.txHash,
    errorReason: status === "failed" ? protocolReason(row.error ?? "", "settle") : null,
  };
}

/** A settlement by its id, read where the id says it lives (its charge's place); a shard not run here has none. */
export async function settlementById(env: Env, x: X402Settings, id: string): Promise<SettlementView | null> {
  const at = placementOf(env).ofId(id);
  if (!at) return null;
  const row = await at.db.prepare(`${SETTLEMENT_SELECT} WHERE id = ?`).bind(id).first<SettlementRow>();
  return row ? settlementView(x, row) : null;
}

/**
 * The settlement of one authorization, found by what the payer signed: its address and nonce. What
 * is signed names no place, so every place is asked (at once); an authorization pays the receiving
 * address it signs, which belongs to one charge or link, so at most one place holds it.
 */
export async function settlementByAuthorization(
  env: Env,
  x: X402Settings,
  payer: string,
  nonce: string,
): Promise<SettlementView | null> {
  const rows = await Promise.all(
    placementOf(env)
      .each()
      .map(({ db }) =>
        db
          .prepare(`${SETTLEMENT_SELECT} WHERE network = ? AND asset = ? AND payer = ? AND nonce = ?`)
          .bind(x.network, x.asset.toLowerCase(), payer.toLowerCase(), nonce.toLowerCase())
          .first<SettlementRow>(),
      ),
  );
  const row = rows.find((r) => r !== null);
  return row ? settlementView(x, row) : null;
}

/** The payer of a charge's first settled x402 payment (the authorization's `from`), or null when none settled. */
export async function settledPayerOf(db: D1Database, chargeId: string): Promise<string | null> {
  const payment = await db
    .prepare("SELECT payer FROM x402_payments WHERE charge_id = ? AND status = 'settled' ORDER BY created_at LIMIT 1")
    .bind(chargeId)
    .first<{ payer: string }>();
  return payment?.payer ?? null;
}
