import type { Hex } from "viem";
import { rpcCall, tokenBalancesAt } from "../chain/client";
import type { Env, X402Settings } from "../config/env";
import { placementOf } from "../ledger/place";
import { hdAddressAt } from "../lib/hd";
import { log } from "../lib/log";
import { nowIso } from "../lib/time";

/** Charges and checkout links receive on account 1 of the receiving key (agents' deposit addresses are account 0). */
const RECEIVING_ACCOUNT = 1;

/**
 * What an x402 payment pays: one charge, one checkout link (each of its payments makes a charge), or
 * one merchant's own x402 routes (each payment settled for them makes a charge).
 */
export interface ReceivingOwner {
  kind: "charge" | "checkout_link" | "merchant";
  id: string;
  merchantId: string;
}

/** The receiving address at `index` (BIP-44 path m/44'/60'/1'/0/index of the receiving key). */
export const receivingAddressAt = (mnemonic: string, index: number): `0x${string}` =>
  hdAddressAt(mnemonic, RECEIVING_ACCOUNT, index);

/** The owner's receiving address, if it has one: read beside the payment's other lookups. */
export const receivingAddressStatement = (db: D1Database, ownerId: string) =>
  db.prepare("SELECT idx, address FROM receiving_addresses WHERE owner_id = ?").bind(ownerId);

export type ReceivingRow = { idx: number; address: string | null };

/**
 * The owner's receiving address, assigned on first use: the index is taken in the insert itself
 * (D1 runs statements one at a time, and `idx` is the key), so concurrent first uses of different
 * owners get distinct indexes and of one owner the same row. The address is then derived from the
 * stored index, so an assignment interrupted before the address was written is completed the next
 * time, never given a second index. Pass the row already read, if any, to skip the first trip.
 */
export async function ensureReceivingAddress(
  env: Env,
  x: X402Settings,
  owner: ReceivingOwner,
  known?: ReceivingRow | null,
): Promise<`0x${string}`> {
  const control = placementOf(env).control.db;
  let row = known ?? null;
  if (!row) {
    const [, read] = await control.batch<ReceivingRow>([
      control
        .prepare(
          `INSERT INTO receiving_addresses (idx, owner_id, owner_kind, merchant_id, address, created_at)
         VALUES ((SELECT COALESCE(MAX(idx), -1) + 1 FROM receiving_addresses), ?, ?, ?, NULL, ?)
         ON CONFLICT (owner_id) DO NOTHING`,
        )
        .bind(owner.id, owner.kind, owner.merchantId, nowIso()),
      receivingAddressStatement(control, owner.id),
    ]);
    row = read!.results[0]!;
  }
  if (row.address) return row.address as `0x${string}`;
  const address = receivingAddressAt(x.receivingMnemonic, row.idx).toLowerCase() as `0x${string}`;
  await control
    .prepare("UPDATE receiving_addresses SET address = ? WHERE idx = ? AND address IS NULL")
    .bind(address, row.idx)
    .run();
  return address;
}

export interface ReceivingHolding {
  address: string;
  ownerKind: string;
  ownerId: string;
  merchantId: string;
  payments: number;
  /** Token base units settled to it (decimal string: base units can pass 2^53). */
  receivedBaseUnits: string;
  /** What the token holds there now, at `asOfBlock`; null when the chain could not be read. */
  balanceBaseUnits: string | null;
  lastPaymentAt: string;
}

export interface ReceivingReport {
  asOfBlock: number | null;
  totals: { addresses: number; payments: number; receivedBaseUnits: string };
  addresses: ReceivingHolding[];
}

/**
 * What x402 payments left on the charges' and links' receiving addresses: from the ledger side,
 * what was settled to each (all of them in the totals; the `limit` most recently paid listed),
 * and from the chain, what each listed address holds now, read in one JSON-RPC batch at one block.
 * The tokens are the service's (it holds the addresses' keys): the cron sweeps each settled
 * payment's value on to the settlement address, so an address holds what was received until its
 * payments are swept, then nothing (or what arrived outside a payment).
 */
export async function receivingReport(env: Env, x: X402Settings, limit: number): Promise<ReceivingReport> {
  const { rows, total } = placementOf(env).sharded
    ? await settledOverShards(env, limit)
    : await settledInOne(env, limit);
  const held = await balancesAt(
    x,
    rows.map((r) => r.address),
  );
  return {
    asOfBlock: held?.block ?? null,
    totals: {
      addresses: total.addresses,
      payments: total.payments,
      receivedBaseUnits: BigInt(total.received).toString(),
    },
    addresses: rows.map((r, i) => ({
      address: r.address,
      ownerKind: r.ownerKind,
      ownerId: r.ownerId,
      merchantId: r.merchantId,
      payments: r.payments,
      receivedBaseUnits: BigInt(r.received).toString(),
      balanceBaseUnits: held ? held.balances[i]!.toString() : null,
      lastPaymentAt: r.lastPaymentAt,
    })),
  };
}

interface SettledTo {
  address: string;
  ownerKind: string;
  ownerId: string;
  merchantId: string;
  payments: number;
  received: number;
  lastPaymentAt: string;
}
type SettledTotals = { addresses: number; payments: number; received: number };

/** One database holds the payments and the addresses: one batch, a join. */
async function settledInOne(env: Env, limit: number): Promise<{ rows: SettledTo[]; total: SettledTotals }> {
  const db = placementOf(env).control.db;
  const [listed, totals] = await db.batch<Record<string, unknown>>([
    db
      .prepare(
        `SELECT r.address, r.owner_kind AS ownerKind, r.owner_id AS ownerId, r.merchant_id AS merchantId,
              COUNT(*) AS payments, SUM(CAST(p.value AS INTEGER)) AS received, MAX(p.updated_at) AS lastPaymentAt
       FROM x402_payments p JOIN receiving_addresses r ON r.address = p.pay_to
       WHERE p.status = 'settled' GROUP BY r.address ORDER BY lastPaymentAt DESC LIMIT ?`,
      )
      .bind(limit),
    db.prepare(
      "SELECT COUNT(DISTINCT pay_to) AS addresses, COUNT(*) AS payments, COALESCE(SUM(CAST(value AS INTEGER)), 0) AS received FROM x402_payments WHERE status = 'settled' AND pay_to IS NOT NULL",
    ),
  ]);
  return { rows: listed!.results as unknown as SettledTo[], total: totals!.results[0] as unknown as SettledTotals };
}

/**
 * With more than one ledger shard, the payments are in their charges' places and the addresses in
 * control: each place's most recently paid addresses (at most `limit`) and totals, then the
 * addresses' owners from control. An address is one charge's or link's, so in one place only, and
 * the places' totals add up.
 */
async function settledOverShards(env: Env, limit: number): Promise<{ rows: SettledTo[]; total: SettledTotals }> {
  const place = placementOf(env);
  const perPlace = await Promise.all(
    place.each().map(({ db }) =>
      db.batch<Record<string, unknown>>([
        db
          .prepare(
            `SELECT pay_to AS address, COUNT(*) AS payments, SUM(CAST(value AS INTEGER)) AS received, MAX(updated_at) AS lastPaymentAt
           FROM x402_payments WHERE status = 'settled' AND pay_to IS NOT NULL GROUP BY pay_to ORDER BY lastPaymentAt DESC LIMIT ?`,
          )
          .bind(limit),
        db.prepare(
          "SELECT COUNT(DISTINCT pay_to) AS addresses, COUNT(*) AS payments, COALESCE(SUM(CAST(value AS INTEGER)), 0) AS received FROM x402_payments WHERE status = 'settled' AND pay_to IS NOT NULL",
        ),
      ]),
    ),
  );
  const total: SettledTotals = { addresses: 0, payments: 0, received: 0 };
  for (const [, totals] of perPlace) {
    const t = totals!.results[0] as unknown as SettledTotals;
    total.addresses += t.addresses;
    total.payments += t.payments;
    total.received += t.received;
  }
  const paid = perPlace
    .flatMap(([listed]) => listed!.results as unknown as Omit<SettledTo, "ownerKind" | "ownerId" | "merchantId">[])
    .sort((a, b) => (a.lastPaymentAt < b.lastPaymentAt ? 1 : a.lastPaymentAt > b.lastPaymentAt ? -1 : 0));
  const owners = await place.control.db
    .prepare(
      `SELECT address, owner_kind AS ownerKind, owner_id AS ownerId, merchant_id AS merchantId
     FROM receiving_addresses WHERE address IN (SELECT value FROM json_each(?))`,
    )
    .bind(JSON.stringify(paid.map((p) => p.address)))
    .all<{ address: string; ownerKind: string; ownerId: string; merchantId: string }>();
  const ownerOf = new Map(owners.results.map((o) => [o.address, o]));
  const rows = paid.flatMap((p) => {
    const owner = ownerOf.get(p.address);
    return owner ? [{ ...p, ...owner }] : [];
  });
  return { rows: rows.slice(0, limit), total };
}

/** The token balances of `addresses` at the chain's current block, in one batch; null when the chain cannot be read. */
async function balancesAt(x: X402Settings, addresses: string[]): Promise<{ block: number; balances: bigint[] } | null> {
  try {
    const block = await rpcCall<string>(x, "eth_blockNumber", [], { retry: true });
    const balances = await tokenBalancesAt(x, addresses, block as Hex);
    return { block: Number(block), balances };
  } catch (error) {
    log.warn("receiving_report", { error });
    return null;
  }
}
