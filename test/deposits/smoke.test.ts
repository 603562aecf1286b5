import { env } from "cloudflare:workers";
import { createWalletClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { watchDeposits } from "../../src/deposits/watcher";
import { api } from "../helpers/api";
import { ownDepositIndexes } from "../helpers/deposits";
import { balanceOf, createAgent } from "../helpers/factories";
import { chain, publicClient } from "../helpers/x402";

const TRANSFER_ABI = [
  {
    type: "function",
    name: "transfer",
    stateMutability: "nonpayable",
    inputs: [
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
    ],
    outputs: [{ type: "bool" }],
  },
] as const;

beforeAll(ownDepositIndexes);

describe("deposit smoke", () => {
  it("credits a transfer to the agent's deposit address once, after confirmations", async () => {
    const agent = await createAgent();
    const bal = await api("GET", "/balance", { token: agent.apiKey });
    const depositAddress = bal.body.depositAddress as Hex;
    expect(depositAddress).toMatch(/^0x[0-9a-f]{40}$/);
    const c = chain();
    const wallet = createWalletClient({
      account: privateKeyToAccount(c.accounts[2]!.privateKey),
      transport: http(c.rpcUrl),
    });
    const hash = await wallet.writeContract({
      chain: null,
      address: c.token,
      abi: TRANSFER_ABI,
      functionName: "transfer",
      args: [depositAddress, 1_230_000n],
    });
    const { blockNumber } = await publicClient().waitForTransactionReceipt({ hash });
    // Two confirmations are required. Other files share the chain and may mine a block meanwhile, so
    // the head is read around the watcher: it never reads past the head less one block.
    const before = await publicClient().getBlockNumber();
    const first = await watchDeposits(env);
    const after = await publicClient().getBlockNumber();
    expect(first.toBlock === null || BigInt(first.toBlock) <= after - 1n).toBe(true);
    const credited = await balanceOf(agent.apiKey);
    if (after < blockNumber + 1n) expect(credited).toBe(0);
    else if (before >= blockNumber + 1n) expect(credited).toBe(123);
    else expect([0, 123]).toContain(credited);
    await publicClient().request({ method: "evm_mine" as never, params: [] as never });
    await watchDeposits(env);
    expect(await balanceOf(agent.apiKey)).toBe(123);
    await watchDeposits(env);
    expect(await balanceOf(agent.apiKey)).toBe(123);
  });
});

describe("deposit watcher after a chain reset", () => {
  it("a cursor ahead of the chain head (a restarted local chain) is read again from the start (regression)", async () => {
    const agent = await createAgent();
    const depositAddress = (await api("GET", "/balance", { token: agent.apiKey })).body.depositAddress as Hex;
    const c = chain();
    await watchDeposits(env);
    const cursor = await env.DB.prepare("SELECT name FROM chain_cursors").first<{ name: string }>();
    await env.DB.prepare("UPDATE chain_cursors SET block_number = 1000000 WHERE name = ?").bind(cursor!.name).run();
    const wallet = createWalletClient({
      account: privateKeyToAccount(c.accounts[2]!.privateKey),
      transport: http(c.rpcUrl),
    });
    const hash = await wallet.writeContract({
      chain: null,
      address: c.token,
      abi: TRANSFER_ABI,
      functionName: "transfer",
      args: [depositAddress, 700_000n],
    });
    await publicClient().waitForTransactionReceipt({ hash });
    await publicClient().request({ method: "evm_mine" as never, params: [] as never });
    await watchDeposits(env);
    expect(await balanceOf(agent.apiKey)).toBe(70);
  });
});
