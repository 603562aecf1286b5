import type { X402Settings } from "../config/env";

/*
 * Figures the ledger reads across owners for other folders: the treasury's view of one shard (every
 * domain's money in and out, the balances owed, what is in transit), read in one D1 batch so they are
 * one snapshot, and the part of an agent's spending that went to other shards.
 */

/**
 * What the ledger says the service should hold on chain, and the balances it owes, exact: in the
 * token's base units (1 cent = 10,000). Whoever shows them in cents rounds the total down, never
 * each shard's or row's part (ten payments of $0.001 are 1 cent).
 */
export interface LedgerSide {
  /** Every credited deposit (whole cents: a deposit's dust is not credited) and every settled x402 payment (exact). */
  onChainInBaseUnits: bigint;
  /** Every `paid` payout, every `succeeded` x402 refund, and every `settled` agent payment of an x402 paywall. */
  onChainOutBaseUnits: bigint;
  /**
   * Payouts and x402 refunds still `pending`, and agents' x402 payments still `authorized`: debited,
   * their tokens maybe not gone yet.
   */
  pendingOutBaseUnits: bigint;
  agentBalancesBaseUnits: bigint;
  merchantBalancesBaseUnits: bigint;
  /**
   * Money between two ledger shards (the sum of the `transit:<k>` accounts): left one shard, not yet
   * arrived in the other. Internal, never on chain: the verdict does not read it.
   */
  inTransitBaseUnits: bigint;
  /** Agents' x402 authorizations signed and not yet settled or released: what the treasury has promised and not paid. */
  outstandingAuthorizationsBaseUnits: bigint;
  outstandingAuthorizations: bigint;
}

/** One shard's figures, and the receiving addresses there whose holdings are not swept yet. */
export interface ShardFigures {
  ledger: LedgerSide;
  /** Lowercase addresses, each once; never the settlement address. */
  unsweptAddresses: string[];
}

/**
 * Base units the agent `agent` sent toward charges in other shards since `since` (SQL expressions,
 * such as `?1` and `?2`): its payment transfers, pending or completed; a reversed one gave the money
 * back. A transfer row counts cents: a payment across shards moves whole cents only (sendPlan).
 */
export const transferredByAgentSince = (agent: string, since: string) =>
  `COALESCE((SELECT SUM(amount_minor) * 10000 FROM ledger_transfers
     WHERE agent_id = ${agent} AND kind = 'payment' AND status <> 'reversed' AND created_at >= ${since}), 0)`;

/** A sum read as decimal text: D1 answers numbers, which lose base units past 2^53. */
const exact = (sum: string) => `CAST(COALESCE(${sum}, 0) AS TEXT)`;

const notSwept = (owner: string) =>
  `NOT EXISTS (SELECT 1 FROM outbound_transfers o WHERE o.purpose = 'sweep' AND o.owner_id = ${owner} AND o.status = 'confirmed')`;

/**
 * One ledger shard's figures, in one D1 batch. A sweep's `outbound_transfers` row lives with the
 * deposit or payment it sweeps (in its owner's shard), so "not swept" stays a query in one database.
 * An address is unswept while one of its deposits or x402 payments has no confirmed sweep; deposits
 * under `minSweepBaseUnits` (dust, never swept) are left out.
 */
export async function shardFigures(db: D1Database, x: X402Settings, minSweepBaseUnits: number): Promise<ShardFigures> {
  const payTo = x.payTo.toLowerCase();
  const [deposits, payments, payouts, refunds, balances, addresses, transit, paidOut402] = await db.batch<
    Record<string, string>
  >([
    // A deposit credits whole cents (its dust stays on chain, unbooked): its cents are what the ledger took.
    db
      .prepare(
        `SELECT ${exact("SUM(amount_minor) * 10000")} AS n FROM deposits WHERE status = 'credited' AND network = ?`,
      )
      .bind(x.network),
    // The charge's exact amount, as the ledger credited it: an x402 price can be below a cent.
    db
      .prepare(
        `SELECT ${exact("SUM(c.amount_base_units)")} AS n FROM x402_payments p JOIN charges c ON c.id = p.charge_id
       WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?`,
      )
      .bind(x.network, x.asset.toLowerCase()),
    // Payouts move whole cents; a refund moves its exact amount (below a cent for a payment below a cent).
    db.prepare(
      `SELECT ${exact("SUM(CASE WHEN status = 'paid' THEN amount_minor END) * 10000")} AS out,
              ${exact("SUM(CASE WHEN status = 'pending' THEN amount_minor END) * 10000")} AS pending
       FROM payouts WHERE status IN ('paid', 'pending')`,
    ),
    db.prepare(
      `SELECT ${exact("SUM(CASE WHEN status = 'succeeded' THEN amount_base_units END)")} AS out,
              ${exact("SUM(CASE WHEN status = 'pending' THEN amount_base_units END)")} AS pending
       FROM refunds WHERE method = 'x402' AND status IN ('succeeded', 'pending')`,
    ),
    db.prepare(
      `SELECT (SELECT ${exact("SUM(balance_base_units)")} FROM agents) AS agents,
              (SELECT ${exact("SUM(balance_base_units)")} FROM merchants) AS merchants`,
    ),
    db
      .prepare(
        `SELECT d.address AS address FROM deposits d
       WHERE d.network = ? AND d.address <> ? AND CAST(d.value AS INTEGER) >= ? AND ${notSwept("d.id")}
       UNION
       SELECT p.pay_to AS address FROM x402_payments p
       WHERE p.status = 'settled' AND p.network = ? AND p.asset = ? AND p.pay_to IS NOT NULL AND p.pay_to <> ?
         AND ${notSwept("p.id")}`,
      )
      .bind(x.network, payTo, minSweepBaseUnits, x.network, x.asset.toLowerCase(), payTo),
    db.prepare(`SELECT ${exact("SUM(amount_base_units)")} AS n FROM ledger_entries WHERE account LIKE 'transit:%'`),
    // Agents' payments of x402 paywalls anywhere, from the settlement address: out once used on
    // chain; pending while signed and unused (the paywall may still use it); nothing once released.
    db
      .prepare(
        `SELECT ${exact("SUM(CASE WHEN status = 'settled' THEN amount_base_units END)")} AS out,
              ${exact("SUM(CASE WHEN status = 'authorized' THEN amount_base_units END)")} AS pending,
              CAST(COUNT(CASE WHEN status = 'authorized' THEN 1 END) AS TEXT) AS promised
       FROM agent_x402_payments WHERE status IN ('settled', 'authorized') AND lower(asset) = ?`,
      )
      .bind(x.asset.toLowerCase()),
  ]);
  const one = (r: D1Result<Record<string, string>> | undefined) => r!.results[0]!;
  const paidOut = one(payouts);
  const refunded = one(refunds);
  const agentsPaid = one(paidOut402);
  return {
    ledger: {
      onChainInBaseUnits: BigInt(one(deposits).n!) + BigInt(one(payments).n!),
      onChainOutBaseUnits: BigInt(paidOut.out!) + BigInt(refunded.out!) + BigInt(agentsPaid.out!),
      pendingOutBaseUnits: BigInt(paidOut.pending!) + BigInt(refunded.pending!) + BigInt(agentsPaid.pending!),
      agentBalancesBaseUnits: BigInt(one(balances).agents!),
      merchantBalancesBaseUnits: BigInt(one(balances).merchants!),
      inTransitBaseUnits: BigInt(one(transit).n!),
      outstandingAuthorizationsBaseUnits: BigInt(agentsPaid.pending!),
      outstandingAuthorizations: BigInt(agentsPaid.promised!),
    },
    unsweptAddresses: [...new Set(addresses!.results.map((r) => String(r.address).toLowerCase()))],
  };
}
