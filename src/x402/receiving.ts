import type { Env, X402Settings } from "../env";
import { hdAddressAt } from "../lib/hd";
import { nowIso } from "../lib/time";

/** Charges and checkout links receive on account 1 of the receiving key (agents' deposit addresses are account 0). */
const RECEIVING_ACCOUNT = 1;

/** What an x402 payment pays: one charge, or one checkout link (each of its payments makes a charge). */
export interface ReceivingOwner {
  kind: "charge" | "checkout_link";
  id: string;
  merchantId: string;
}

/** The receiving address at `index` (BIP-44 path m/44'/60'/1'/0/index of the receiving key). */
export const receivingAddressAt = (mnemonic: string, index: number): `0x${string}` => hdAddressAt(mnemonic, RECEIVING_ACCOUNT, index);

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
export async function ensureReceivingAddress(env: Env, x: X402Settings, owner: ReceivingOwner, known?: ReceivingRow | null): Promise<`0x${string}`> {
  let row = known ?? null;
  if (!row) {
    const [, read] = await env.DB.batch<ReceivingRow>([
      env.DB.prepare(
        `INSERT INTO receiving_addresses (idx, owner_id, owner_kind, merchant_id, address, created_at)
         VALUES ((SELECT COALESCE(MAX(idx), -1) + 1 FROM receiving_addresses), ?, ?, ?, NULL, ?)
         ON CONFLICT (owner_id) DO NOTHING`,
      ).bind(owner.id, owner.kind, owner.merchantId, nowIso()),
      receivingAddressStatement(env.DB, owner.id),
    ]);
    row = read!.results[0]!;
  }
  if (row.address) return row.address as `0x${string}`;
  const address = receivingAddressAt(x.receivingMnemonic, row.idx).toLowerCase() as `0x${string}`;
  await env.DB.prepare("UPDATE receiving_addresses SET address = ? WHERE idx = ? AND address IS NULL").bind(address, row.idx).run();
  return address;
}
