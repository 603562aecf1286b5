import { desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import type { Env } from "../config/env";
import { merchants } from "../db/schema";
import { hashApiKey } from "../auth/credentials";
import { CONTROL_IDS, newId, newSecret } from "../lib/ids";
import { nowIso } from "../lib/time";
import { nothingMore, writeTogether, type WithCreated } from "../db/statements";
import { directoryEntry } from "../ledger/directory";
import { placementOf } from "../ledger/place";
import { withHomeFields, writeHomeRow } from "../ledger/home-rows";

export type MerchantRow = typeof merchants.$inferSelect;

/** The spec's merchant object (`GET /merchant/me`). */
export const merchantView = (m: MerchantRow) => ({
  id: m.id,
  name: m.name,
  balanceMinor: m.balanceMinor,
  currency: m.currency,
  payoutAddress: m.payoutAddress,
});

/** The console's merchant list entry (docs/api.md, Console merchants). */
export const consoleMerchantView = (m: MerchantRow) => ({
  id: m.id,
  name: m.name,
  category: m.category,
  balanceMinor: m.balanceMinor,
  currency: m.currency,
  payoutAddress: m.payoutAddress,
  createdAt: m.createdAt,
});

/** Registers a merchant; the API key is returned here once and only its hash is kept. */
export async function registerMerchant(
  env: Env,
  db: Db,
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
  await writeTogether(db, [
    db.insert(merchants).values({
      id: merchantId,
      name,
      category,
      apiKeyHash: await hashApiKey(apiKey),
      createdAt,
    }),
    directoryEntry("merchant", merchantId, home, createdAt),
    ...(await withCreated(created)),
  ]);
  return created;
}

export const getMerchant = (db: Db, id: string) => db.select().from(merchants).where(eq(merchants.id, id)).get();

export const listMerchants = (db: Db, limit: number) =>
  db.select().from(merchants).orderBy(desc(merchants.createdAt), desc(sql`rowid`)).limit(limit).all();

/** The newest merchants as the console lists them: their balances from their home shards. */
export const listMerchantsAtHome = async (env: Env, db: Db, limit: number) =>
  withHomeFields(env, "merchant", await listMerchants(db, limit));

export const setPayoutAddress = (db: Db, id: string, address: string) =>
  db.update(merchants).set({ payoutAddress: address }).where(eq(merchants.id, id));

/** The merchant's balance: its home's account row's (at home in control, the row already read). */
export async function homeBalance(env: Env, merchant: MerchantRow): Promise<number> {
  const home = await placementOf(env).ofMerchant(merchant.id);
  if (home.isControl) return merchant.balanceMinor;
  const row = await home.db
    .prepare("SELECT balance_minor AS balanceMinor FROM merchants WHERE id = ?")
    .bind(merchant.id)
    .first<{ balanceMinor: number }>();
  return row?.balanceMinor ?? 0;
}
