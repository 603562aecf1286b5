import { env } from "cloudflare:workers";
import { toHex } from "viem";
import { watchDeposits } from "../../src/deposits/watcher";
import { publicClient } from "./x402";

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
