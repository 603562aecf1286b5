import { isAddressEqual, parseEventLogs } from "viem";
import { EIP3009_ABI, type Receipt, receiptNow, rpcCall } from "../chain/client";
import type { Env, X402Settings } from "../config/env";
import { guard, type SqlStatement, sqlStatement } from "../db/statements";
import { depositOfTransaction } from "../deposits/sweepable";
import { placementOf } from "../ledger/place";
import type { CommitPlan } from "../ledger/plan";
import { nowIso } from "../lib/time";
import { outboundOfTransaction } from "../outbound/authorization";
import { paymentOfTransaction } from "../x402/sweepable";

/*
 * The operator's float: tokens put into the treasury on purpose (to pay payouts from, or the local
 * chain's own mint), booked once per transaction so the ledger's expectation includes them. A
 * funding moves no one's money: it posts no ledger entries (nobody is owed it) and is recorded by its
 * row in `treasury_fundings` and an audit row, in one batch of control's sequencer.
 */

/** A booked funding: the transaction and the base units it brought to the settlement address. */
export interface Funding {
  transaction: `0x${string}`;
  amountBaseUnits: bigint;
  bookedAt: string;
}

export type FundingRefusal =
  /** Booked before (by this request's twin, or any other). */
  | "funding_already_booked"
  /** Unknown to the node, not mined yet, reverted, or no transfer of the token to the settlement address. */
  | "no_funding_transfer"
  /** Mined, but not yet as deep as a deposit must be (DEPOSIT_CONFIRMATIONS). */
  | "funding_not_confirmed"
  /** One of the service's own movements (a sweep, an x402 settlement, a deposit): the ledger counts it already. */
  | "funding_already_counted";

export type FundingOutcome = { ok: true; funding: Funding } | { ok: false; reason: FundingRefusal };

/**
 * What a mined transaction brought to the settlement address: the sum of its `Transfer` logs of the
 * deployment's token whose `to` is the settlement address, leaving out any from the settlement
 * address itself (a transfer to itself brings nothing). A reverted transaction brought nothing.
 */
export function fundingTransferred(x: X402Settings, receipt: Receipt): bigint {
  if (receipt.status !== "success") return 0n;
  const transfers = parseEventLogs({
    abi: EIP3009_ABI,
    eventName: "Transfer",
    logs: receipt.logs.filter((l) => isAddressEqual(l.address, x.asset)),
  });
  return transfers
    .filter((t) => isAddressEqual(t.args.to, x.payTo) && !isAddressEqual(t.args.from, x.payTo))
    .reduce((sum, t) => sum + t.args.value, 0n);
}

const BOOKED = "SELECT 1 FROM treasury_fundings WHERE tx_hash = ?";

/**
 * Books `transaction` as the operator's float: reads its receipt, checks it is deep enough and not one
 * of the service's own movements, then commits the row and its audit row in one batch, guarded so a
 * transaction is booked once however many requests race (the sequencer runs them one after another;
 * the unique index on `tx_hash` stands behind the guard). `answer` is what must commit beside it (the
 * stored answer of an Idempotency-Key).
 */
export async function bookFunding(
  env: Env,
  x: X402Settings,
  transaction: `0x${string}`,
  by: string,
  answer: (funding: Funding) => Promise<SqlStatement[]>,
): Promise<FundingOutcome> {
  const txHash = transaction.toLowerCase() as `0x${string}`;
  const { control } = placementOf(env);
  // Cheap first: a booked transaction needs no chain read. The batch's guard decides.
  if (await control.db.prepare(BOOKED).bind(txHash).first()) return { ok: false, reason: "funding_already_booked" };
  const receipt = await receiptNow(x, txHash);
  const amount = receipt ? fundingTransferred(x, receipt) : 0n;
  if (!receipt || amount === 0n) return { ok: false, reason: "no_funding_transfer" };
  const head = BigInt(await rpcCall<string>(x, "eth_blockNumber", [], { retry: true }));
  if (head - receipt.blockNumber + 1n < BigInt(x.depositConfirmations))
    return { ok: false, reason: "funding_not_confirmed" };
  if (await countedAlready(env, txHash)) return { ok: false, reason: "funding_already_counted" };

  const funding: Funding = { transaction: txHash, amountBaseUnits: amount, bookedAt: nowIso() };
  const plan = fundingPlan(x, funding, Number(receipt.blockNumber), by, await answer(funding));
  const result = await control.commit(plan);
  if (result.kind === "committed") return { ok: true, funding };
  if (result.reason === "funding_already_booked") return { ok: false, reason: result.reason };
  throw new Error(`funding refused: ${result.reason}`);
}

/**
 * Whether the service recorded `txHash` as one of its own movements, in any place: a sweep into the
 * settlement address or an x402 payment settled to it is already in the ledger's expectation, and
 * booking it as well would count its tokens twice (a false shortfall no one could undo). Read before
 * the booking: the service records its own transaction once it is mined, well before it is deep
 * enough to be booked.
 */
async function countedAlready(env: Env, txHash: string): Promise<boolean> {
  const found = await Promise.all(
    placementOf(env)
      .each()
      .map(({ db }) =>
        db
          .prepare(
            `SELECT ${outboundOfTransaction("?1")} OR ${paymentOfTransaction("?1")} OR ${depositOfTransaction("?1")} AS counted`,
          )
          .bind(txHash)
          .first<number>("counted"),
      ),
  );
  return found.some((counted) => counted === 1);
}

function fundingPlan(
  x: X402Settings,
  funding: Funding,
  blockNumber: number,
  by: string,
  epilogue: SqlStatement[],
): CommitPlan {
  const { transaction, bookedAt } = funding;
  const amountBaseUnits = funding.amountBaseUnits.toString();
  const asset = x.asset.toLowerCase();
  return {
    statements: [
      // Not an appended row: a second plan for the same transaction later in the same group must see it.
      guard("funding_already_booked", `NOT EXISTS (${BOOKED})`, transaction),
      sqlStatement(
        `INSERT INTO treasury_fundings (tx_hash, network, asset, amount_base_units, block_number, booked_by, booked_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
        transaction,
        x.network,
        asset,
        amountBaseUnits,
        blockNumber,
        by,
        bookedAt,
      ),
      ...epilogue,
    ],
    audit: [
      {
        type: "treasury.funding_booked",
        reference: transaction,
        chargeId: null,
        agentId: null,
        merchantId: null,
        // No ledger money moves (the amount is in base units, in `data`): see docs/decisions.md.
        amountMinor: 0,
        currency: "USD",
        data: { by, transaction, amountBaseUnits, network: x.network, asset, blockNumber },
        createdAt: bookedAt,
      },
    ],
  };
}

/**
 * The float: every funding booked on the deployment's network and token, in base units. SQLite sums
 * the integers exactly (64 bits) and the text cast keeps them exact past 2^53 on the way out.
 */
export async function readFloat(control: D1Database, x: X402Settings): Promise<bigint> {
  const sum = await control
    .prepare(
      `SELECT CAST(COALESCE(SUM(CAST(amount_base_units AS INTEGER)), 0) AS TEXT) AS n
       FROM treasury_fundings WHERE network = ? AND asset = ?`,
    )
    .bind(x.network, x.asset.toLowerCase())
    .first<string>("n");
  return BigInt(sum ?? "0");
}

/** A booked funding as the console lists it. */
export interface FundingRow {
  transaction: string;
  amountBaseUnits: string;
  bookedBy: string;
  bookedAt: string;
}

/** The `limit` latest fundings of the deployment's network and token, newest first. */
export async function listFundings(control: D1Database, x: X402Settings, limit: number): Promise<FundingRow[]> {
  const rows = await control
    .prepare(
      `SELECT tx_hash AS "transaction", amount_base_units AS amountBaseUnits, booked_by AS bookedBy, booked_at AS bookedAt
       FROM treasury_fundings WHERE network = ? AND asset = ? ORDER BY id DESC LIMIT ?`,
    )
    .bind(x.network, x.asset.toLowerCase(), limit)
    .all<FundingRow>();
  return rows.results;
}
