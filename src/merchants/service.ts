import { hashApiKey } from "../auth/credentials";
import type { Env } from "../config/env";
import type { merchants } from "../db/schema";
import { executeBatch, nothingMore, sqlStatement, type WithCreated } from "../db/statements";
import { directoryEntry } from "../ledger/directory";
import { BALANCE_COLUMNS, withHomeFields, writeHomeRow } from "../ledger/home-rows";
import { placementOf } from "../ledger/place";
import { CONTROL_IDS, newId, newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";

/** A merchant row as read: its exact balance a decimal string (BALANCE_COLUMNS). */
export type MerchantRow = Omit<typeof merchants.$inferSelect, "balanceBaseUnits"> & { balanceBaseUnits: string };

/** The spec's merchant object (`GET /merchant/me`). */
export const merchantView = (m: MerchantRow) => ({
  id: m.id,
  name: m.name,
  balanceMinor: m.balanceMinor,
  balanceBaseUnits: m.balanceBaseUnits,
  currency: m.currency,
  payoutAddress: m.payoutAddress,
});

/** The console's merchant list entry (docs/api.md, Console merchants). */
export const consoleMerchantView = (m: MerchantRow) => ({
  id: m.id,
  name: m.name,
  category: m.category,
  balanceMinor: m.balanceMinor,
  balanceBaseUnits: m.balanceBaseUnits,
  currency: m.currency,
  payoutAddress: m.payoutAddress,
  createdAt: m.createdAt,
});

/** A merchant row's columns named as in MerchantRow. */
const MERCHANT_COLUMNS = `id, name, category, api_key_hash AS apiKeyHash, previous_api_key_hash AS previousApiKeyHash,
  previous_key_expires_at AS previousKeyExpiresAt, ${BALANCE_COLUMNS}, currency, payout_address AS payoutAddress,
  created_at AS createdAt`;

/** Registers a merchant in control (`control`); the API key is returned here once and only its hash is kept. */
export async function registerMerchant(
  env: Env,
  control: D1Database,
  input: { name: string; category?: string | undefined },
  withCreated: WithCreated<{ merchantId: string; apiKey: string }> = nothingMore,
) {
  const merchantId = newId("merchant", CONTROL_IDS);
  const apiKey = newSecret("merchantKey");
  const created = { merchantId, apiKey };
  const createdAt = nowIso();
  const home = placementOf(env).forNewOwner();
  const name = input.name;
  const category = input.category ?? null;
  await writeHomeRow("merchant", home, { id: merchantId, name, category, createdAt });
  await executeBatch(control, [
    sqlStatement(
      "INSERT INTO merchants (id, name, category, api_key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
      merchantId,
      name,
      category,
      await hashApiKey(apiKey),
      createdAt,
    ),
    directoryEntry("merchant", merchantId, home, createdAt),
    ...(await withCreated(created)),
  ]);
  return created;
}

export const getMerchant = async (d1: D1Database, id: string) =>
  (await d1.prepare(`SELECT ${MERCHANT_COLUMNS} FROM merchants WHERE id = ?`).bind(id).first<MerchantRow>()) ??
  undefined;

/** A merchant's name, which never changes: a read to batch with others. */
export const merchantNameStatement = (d1: D1Database, id: string) =>
  d1.prepare("SELECT name FROM merchants WHERE id = ?").bind(id);

export async function listMerchants(d1: D1Database, limit: number) {
  const { results } = await d1
    .prepare(`SELECT ${MERCHANT_COLUMNS} FROM merchants ORDER BY created_at DESC, rowid DESC LIMIT ?`)
    .bind(limit)
    .all<MerchantRow>();
  return results;
}

/** The newest merchants as the console lists them: their balances from their home shards. */
export const listMerchantsAtHome = async (env: Env, control: D1Database, limit: number) =>
  withHomeFields(env, "merchant", await listMerchants(control, limit));

export const setPayoutAddress = (control: D1Database, id: string, address: string) =>
  control.prepare("UPDATE merchants SET payout_address = ? WHERE id = ?").bind(address, id).run();

/** The merchant's balance, in cents and exactly: its home's account row's (at home in control, the row already read). */
export async function homeBalance(
  env: Env,
  merchant: MerchantRow,
): Promise<Pick<MerchantRow, "balanceMinor" | "balanceBaseUnits">> {
  const home = await placementOf(env).ofMerchant(merchant.id);
  if (home.isControl) return merchant;
  const row = await home.db
    .prepare(`SELECT ${BALANCE_COLUMNS} FROM merchants WHERE id = ?`)
    .bind(merchant.id)
    .first<Pick<MerchantRow, "balanceMinor" | "balanceBaseUnits">>();
  return row ?? { balanceMinor: 0, balanceBaseUnits: "0" };
}
