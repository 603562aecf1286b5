import { mnemonicToAccount } from "viem/accounts";
import type { Env } from "../env";
import { settingsOf } from "../env";

/** The deposit address at `index` of the service's deposit key (BIP-44 path m/44'/60'/0'/0/index). */
export const depositAddressAt = (mnemonic: string, index: number) => mnemonicToAccount(mnemonic, { addressIndex: index }).address;

/**
 * The agent's deposit address, assigned on first use: the next derivation
 * index is stored with it, and the unique index on it makes two concurrent
 * assignments pick different indexes (the loser retries).
 */
export async function ensureDepositAddress(env: Env, agentId: string): Promise<string | null> {
  const mnemonic = settingsOf(env).x402?.depositMnemonic;
  if (!mnemonic) return null;
  for (let attempt = 0; attempt < 5; attempt++) {
    const row = await env.DB.prepare("SELECT deposit_address AS address FROM agents WHERE id = ?").bind(agentId).first<{ address: string | null }>();
    if (!row) return null;
    if (row.address) return row.address;
    const next = await env.DB.prepare("SELECT COALESCE(MAX(deposit_index), -1) + 1 AS next FROM agents").first<{ next: number }>();
    const index = next?.next ?? 0;
    const address = depositAddressAt(mnemonic, index).toLowerCase();
    try {
      await env.DB.prepare("UPDATE agents SET deposit_index = ?, deposit_address = ? WHERE id = ? AND deposit_address IS NULL").bind(index, address, agentId).run();
    } catch (error) {
      if (!String(error).includes("UNIQUE constraint failed")) throw error;
    }
  }
  throw new Error("could not assign a deposit address");
}
