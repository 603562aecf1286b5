import { env } from "cloudflare:workers";
import { type Hex, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { watchDeposits } from "../../src/deposits/watcher";
import { api } from "../helpers/api";
import { ownDepositIndexes } from "../helpers/deposits";
import { balanceOf, createAgent } from "../helpers/factories";
import { envThrough, logSearches, relayTag } from "../helpers/relay";
import { freshSender, sendTokens } from "../helpers/tokens";
import { publicClient, refuseAtRelay } from "../helpers/x402";

/*
 * The deposit watcher reads the token's Transfer logs once per window and looks the recipients up
 * among the deposit addresses: its eth_getLogs calls follow the blocks read, not the number of
 * agents. Counted through the test relay under a tag of each pass's own. DEPOSIT_CONFIRMATIONS = 2.
 */
const mine = (blocks: number) =>
  publicClient().request({ method: "anvil_mine" as never, params: [toHex(blocks)] as never });
const head = async () => Number(await publicClient().getBlockNumber());

/** Runs the watcher until it has read up to the confirmed head. */
async function catchUp() {
  for (let pass = 0; pass < 50; pass++) {
    const result = await watchDeposits(env);
    if (result.toBlock === null || result.toBlock >= (await head()) - 1) return;
  }
  throw new Error("the deposit watcher did not catch up with the chain");
}

async function depositAddressOf(agentKey: string): Promise<Hex> {
  const res = await api("GET", "/balance", { token: agentKey });
  expect(res.status).toBe(200);
  return res.body.depositAddress;
}

/** `count` agents with deposit addresses that nobody pays, written directly (the watcher reads only the column). */
async function addIdleAgents(count: number) {
  const now = new Date().toISOString();
  const base = (await env.DB.prepare("SELECT COALESCE(MAX(deposit_index), -1) + 1 AS next FROM agents").first<{
    next: number;
  }>())!.next;
  const statements = Array.from({ length: count }, (_, i) =>
    env.DB.prepare(
      "INSERT INTO agents (id, name, api_key_hash, policy, created_at, deposit_index, deposit_address) VALUES (?, ?, ?, '{}', ?, ?, ?)",
    ).bind(
      `agent_idle${crypto.randomUUID().replaceAll("-", "")}`,
      `idle ${i}`,
      crypto.randomUUID(),
      now,
      base + i,
      privateKeyToAccount(generatePrivateKey()).address.toLowerCase(),
    ),
  );
  for (let i = 0; i < statements.length; i += 50) await env.DB.batch(statements.slice(i, i + 50));
}

/** One pass of the watcher through the relay under a tag of its own: what it did and its log searches. */
async function countedPass(vars: Record<string, string> = {}) {
  const tag = relayTag();
  const result = await watchDeposits(envThrough(tag, vars));
  return { result, searches: await logSearches(tag) };
}

afterEach(() => {
  vi.restoreAllMocks();
});

beforeAll(ownDepositIndexes);

describe("the deposit watcher by the token's Transfer logs", () => {
  it("credits by transfer logs exactly once, with as many eth_getLogs for a window with 5 deposit addresses as with 500", async () => {
    const agents = await Promise.all(Array.from({ length: 5 }, (_, i) => createAgent({ name: `logged ${i}` })));
    const addresses = await Promise.all(agents.map((a) => depositAddressOf(a.apiKey)));
    const sender = await freshSender(100_000_000n);
    await catchUp();

    // 5 deposit addresses: one transfer to the first, one to an address nobody holds.
    await sendTokens(sender, addresses[0]!, 1_230_000n);
    await sendTokens(sender, privateKeyToAccount(generatePrivateKey()).address, 990_000n);
    await mine(2);
    const few = await countedPass();
    expect(few.result.credited).toBe(1);
    expect(await balanceOf(agents[0]!.apiKey)).toBe(123);

    // 500 deposit addresses: the same kind of window costs the same searches.
    await addIdleAgents(495);
    expect(
      (await env.DB.prepare("SELECT COUNT(*) AS n FROM agents WHERE deposit_address IS NOT NULL").first<{
        n: number;
      }>())!.n,
    ).toBeGreaterThanOrEqual(500);
    await sendTokens(sender, addresses[1]!, 450_000n);
    await mine(2);
    const many = await countedPass();
    expect(many.result.credited).toBe(1);
    expect(await balanceOf(agents[1]!.apiKey)).toBe(45);
    expect(few.searches).toHaveLength(1);
    expect(many.searches).toHaveLength(few.searches.length);

    // Read again from before both transfers: nothing is credited twice.
    await env.DB.prepare("UPDATE chain_cursors SET block_number = block_number - 12").run();
    const again = await countedPass();
    expect(again.result.credited).toBe(0);
    expect(await balanceOf(agents[0]!.apiKey)).toBe(123);
    expect(await balanceOf(agents[1]!.apiKey)).toBe(45);
  });

  it("reads a backlog longer than RPC_MAX_LOG_RANGE in windows no wider, one eth_getLogs each, moving the cursor after each", async () => {
    await catchUp();
    const agent = await createAgent({ name: "windowed" });
    const address = await depositAddressOf(agent.apiKey);
    const sender = await freshSender(10_000_000n);
    await mine(12);
    await sendTokens(sender, address, 770_000n);
    await mine(14);
    // Passes until caught up (other files mine the shared chain too): together, windows of at most 5 blocks.
    const searches: { from: number; to: number }[] = [];
    let credited = 0;
    let first: number | null = null;
    for (let pass = 0; pass < 20; pass++) {
      const counted = await countedPass({ RPC_MAX_LOG_RANGE: "5" });
      searches.push(...counted.searches);
      credited += counted.result.credited;
      first ??= counted.result.fromBlock;
      if (counted.result.toBlock === null || counted.result.toBlock >= (await head()) - 1) break;
    }
    expect(credited).toBe(1);
    expect(await balanceOf(agent.apiKey)).toBe(77);
    expect(searches.length).toBeGreaterThanOrEqual(5);
    for (const w of searches) expect(w.to - w.from + 1).toBeLessThanOrEqual(5);
    for (let i = 1; i < searches.length; i++) expect(searches[i]!.from).toBe(searches[i - 1]!.to + 1);
    expect(searches[0]!.from).toBe(first);
  });

  it("a refused search is logged as an error; the cursor stays and the next run reads the same window", async () => {
    await catchUp();
    const agent = await createAgent({ name: "refused" });
    const address = await depositAddressOf(agent.apiKey);
    const sender = await freshSender(10_000_000n);
    await sendTokens(sender, address, 330_000n);
    await mine(2);
    const cursor = async () =>
      (await env.DB.prepare("SELECT block_number AS n FROM chain_cursors").first<{ n: number }>())!.n;
    const before = await cursor();
    // Refused by the path it is sent to: other files' watchers search for the same token's transfers.
    const tag = relayTag();
    await refuseAtRelay({
      containing: `/t/${tag}`,
      method: "eth_getLogs",
      times: 1,
      message: "exceed maximum block range: 5000",
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    await expect(watchDeposits(envThrough(tag))).rejects.toThrow("exceed maximum block range");
    expect(
      errors.mock.calls
        .map((c) => JSON.parse(String(c[0])) as Record<string, unknown>)
        .filter((l) => l.where === "rpc_refused" && l.method === "eth_getLogs"),
    ).toHaveLength(1);
    expect(await cursor()).toBe(before);
    expect(await balanceOf(agent.apiKey)).toBe(0);

    const next = await watchDeposits(env);
    expect(next.fromBlock).toBe(before + 1);
    expect(next.credited).toBe(1);
    expect(await balanceOf(agent.apiKey)).toBe(33);
  });
});
