import { env } from "cloudflare:workers";
import { toHex } from "viem";
import { watchDeposits } from "../../src/deposits/watcher";
import { publicClient } from "./x402";

/**
 * Deposit addresses of this file's own: the project's files share one chain and one receiving key,
 * but each has its own database, whose agents' derivation indexes would all start at 0, so two files'
 * agents would hold the same deposit address and each watcher would credit the other's transfers.
 * A row with a random index far from the others' makes this file's next agents count on from there;
 * it has no deposit address, so the watcher never matches it.
 */
export async function ownDepositIndexes() {
  const start = 1_000_000 * (1 + Math.floor(Math.random() * 2_000));
  await env.DB.prepare(
    "INSERT INTO agents (id, name, api_key_hash, policy, created_at, deposit_index) VALUES (?, 'deposit indexes of this file', ?, '{}', ?, ?)",
  )
    .bind(`agent_idx${crypto.randomUUID().replaceAll("-", "")}`, crypto.randomUUID(), new Date().toISOString(), start)
    .run();
}

/** Runs the deposit watcher past the confirmations (2) up to the head of the local chain. */
export async function creditDeposits() {
  await publicClient().request({ method: "anvil_mine" as never, params: [toHex(2)] as never });
  for (let pass = 0; pass < 50; pass++) {
    const head = Number(await publicClient().getBlockNumber());
    const result = await watchDeposits(env);
    if (result.toBlock === null || result.toBlock >= head - 1) return;
  }
  throw new Error("the deposit watcher did not catch up with the chain");
}
