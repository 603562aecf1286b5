import type { Env, X402Settings } from "../config/env";
import { placementOf } from "../ledger/place";
import { MIN_SWEEP_BASE_UNITS } from "../sweeps/due";
import { readFloat } from "./fundings";

/** What the ledger says the service should hold on chain, in cents, and the balances it owes. */
export interface LedgerSide {
  /** Every credited deposit and every settled x402 payment. */
  onChainInMinor: number;
  /** Every `paid` payout and every `succeeded` x402 refund. */
  onChainOutMinor: number;
  /** Payouts and x402 refunds still `pending`: debited, their tokens maybe not gone yet. */
  pendingOutMinor: number;
  agentBalancesMinor: number;
  merchantBalancesMinor: number;
  /**
   * Money between two ledger shards (the sum of the `transit:<k>` accounts): left one shard, not yet
   * arrived in the other. Internal, never on chain: the verdict does not read it.
   */
  inTransitMinor: number;
}

/** The ledger's side and the receiving addresses whose holdings are not swept yet, read together. */
export interface LedgerSnapshot {
  ledger: LedgerSide;
  /** The operator's booked float (src/treasury/fundings.ts), in base units: part of what the chain should hold. */
  floatBaseUnits: bigint;
  /** Lowercase addresses, each once; never the settlement address. */
  unsweptAddresses: string[];
}

const notSwept = (owner: string) =>
  `NOT EXISTS (SELECT 1 FROM outbound_transfers o WHERE o.purpose = 'sweep' AND o.owner_id = ${owner} AND o.status = 'confirmed')`;

/**
 * The ledger's figures and the receiving addresses still holding something of the service's, in one
 * D1 batch (one consistent read). It must be read before the chain's block is pinned: a payment,
 * deposit or payout is recorded here only after its transaction is mined, so everything this read
 * counts is already in the block read after it, and an address whose sweep is confirmed here is
 * already empty there. The other way round a settlement mined after the block would be expected
 * and not held: a false shortfall.
 *
 * An address is read while one of its deposits or x402 payments has no confirmed sweep: pending
 * and failed sweeps included (the tokens may still be there), so the scan follows the money in
 * flight, not the number of agents. Deposits under the sweep minimum (dust, never swept, credited
 * as 0 cents) are left out, so dust sent to many deposit addresses cannot grow the scan.
 */
export async function readLedgerSnapshot(env: Env, x: X402Settings): Promise<LedgerSnapshot> {
  // Every place's batch and control's float at once; all of them finish before the caller pins the
  // block. A funding is booked only once its transaction is mined deep enough, so a float read here
  // is in that block too.
  const place = placementOf(env);
  const [perPlace, floatBaseUnits] = await Promise.all([
    Promise.all(place.each().map(({ db }) => readShardSnapshot(db, x))),
    readFloat(place.control.db, x),
  ]);
  const ledger = { ...perPlace[0]!.ledger };
  for (const one of perPlace.slice(1))
    for (const key of Object.keys(ledger) as (keyof LedgerSide)[]) ledger[key] += one.ledger[key];
  return {
    ledger,
    floatBaseUnits,
    unsweptAddresses: [...new Set(perPlace.flatMap((one) => one.unsweptAddresses))],
  };
}

/**
 * One ledger shard's figures, in one D1 batch. A sweep's `outbound_transfers` row lives with the
 * deposit or payment it sweeps (in its owner's shard), so "not swept" stays a query in one database.
 */
async function readShardSnapshot(db: D1Database, x: X402Settings): Promise<Omit<LedgerSnapshot, "floatBaseUnits">> {
  const payTo = x.payTo.toLowerCase();
  const [deposits, payments, payouts, refunds, balances, addresses, transit] = await db.batch<Record<string, number>>([
    db
      .prepare("SELECT COALESCE(SUM(amount_minor), 0) AS n FROM deposits WHERE status = 'credited' AND network = ?")
      .bind(x.network),
    // The charge's cents, as the ledger credited them (its base units are exactly cents x 10,000).
    db
      .prepare(
        `SELECT COALESCE(SUM(c.amount_minor), 0) AS n FROM x402_payments p JOIN charges c ON c.id = p.charge_id
       WHERE p.status = 'settled' AND p.network = ? AND p.asset = ?`,
      )
      .bind(x.network, x.asset.toLowerCase()),
    db.prepare(
      `SELECT COALESCE(SUM(CASE WHEN status = 'paid' THEN amount_minor END), 0) AS out,
              COALESCE(SUM(CASE WHEN status = 'pending' THEN amount_minor END), 0) AS pending
       FROM payouts WHERE status IN ('paid', 'pending')`,
    ),
    db.prepare(
      `SELECT COALESCE(SUM(CASE WHEN status = 'succeeded' THEN amount_minor END), 0) AS out,
              COALESCE(SUM(CASE WHEN status = 'pending' THEN amount_minor END), 0) AS pending
       FROM refunds WHERE method = 'x402' AND status IN ('succeeded', 'pending')`,
    ),
    db.prepare(
      `SELECT (SELECT COALESCE(SUM(balance_minor), 0) FROM agents) AS agents,
              (SELECT COALESCE(SUM(balance_minor), 0) FROM merchants) AS merchants`,
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
      .bind(x.network, payTo, MIN_SWEEP_BASE_UNITS, x.network, x.asset.toLowerCase(), payTo),
    db.prepare("SELECT COALESCE(SUM(amount_minor), 0) AS n FROM ledger_entries WHERE account LIKE 'transit:%'"),
  ]);
  const one = (r: D1Result<Record<string, number>> | undefined) => r!.results[0]!;
  const paidOut = one(payouts);
  const refunded = one(refunds);
  return {
    ledger: {
      onChainInMinor: one(deposits).n! + one(payments).n!,
      onChainOutMinor: paidOut.out! + refunded.out!,
      pendingOutMinor: paidOut.pending! + refunded.pending!,
      agentBalancesMinor: one(balances).agents!,
      merchantBalancesMinor: one(balances).merchants!,
      inTransitMinor: one(transit).n!,
    },
    unsweptAddresses: [...new Set(addresses!.results.map((r) => String(r.address).toLowerCase()))],
  };
}
