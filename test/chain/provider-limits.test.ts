import { encodeEventTopics, type Hex, pad, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, describe, expect, it, vi } from "vitest";
import { EIP3009_ABI, rpcBatch, tokenBalancesAt } from "../../src/chain/client";
import { authorizationFate, searchLogs } from "../../src/chain/logs";
import { settingsOf } from "../../src/config/env";
import { Invocation, runInvocation } from "../../src/lib/invocation";
import { readHoldings } from "../../src/treasury/holdings";
import { envThrough, logSearches, relayedRequests, relayTag } from "../helpers/relay";
import { setTokens } from "../helpers/tokens";
import { chain, publicClient, randomNonce, refuseAtRelay } from "../helpers/x402";

/*
 * The chain client within a provider's caps (RPC_MAX_BATCH, RPC_MAX_LOG_RANGE), through the test
 * relay under a tag of each test's own, so what it counts is this test's requests alone. A cap of
 * 10 blocks stands for the providers' 1,000 here: a history longer than it takes a few mined blocks,
 * not thousands (each mined block moves the chain's clock a second ahead).
 */
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const mine = (blocks: number) =>
  publicClient().request({ method: "anvil_mine" as never, params: [toHex(blocks)] as never });
const head = async () => Number(await publicClient().getBlockNumber());

afterEach(() => {
  vi.restoreAllMocks();
});

describe("JSON-RPC batches within RPC_MAX_BATCH", () => {
  it("a batch of 250 reads arrives as 3 requests of at most 100 calls, and its answers come back in order", async () => {
    const tag = relayTag();
    const x = settingsOf(envThrough(tag)).x402!;
    expect(x.maxBatch).toBe(100);
    const top = await head();
    const numbers = Array.from({ length: 250 }, (_, i) => i % (top + 1));
    const answers = await rpcBatch(
      x,
      numbers.map((n) => ({ method: "eth_getBlockByNumber", params: [toHex(n), false] })),
    );
    expect(answers.map((a) => Number((a.result as { number: string }).number))).toEqual(numbers);
    const requests = await relayedRequests(tag);
    expect(requests).toHaveLength(3);
    expect(requests.every((r) => r.batch)).toBe(true);
    expect(requests.map((r) => r.calls.length).sort((a, b) => a - b)).toEqual([50, 100, 100]);
  });

  it("the treasury's balance reads (tokenBalancesAt) go RPC_MAX_BATCH to a request, each balance in its place", async () => {
    const tag = relayTag();
    const x = settingsOf(envThrough(tag, { RPC_MAX_BATCH: "40" })).x402!;
    const addresses = Array.from({ length: 130 }, freshAddress);
    await setTokens(addresses[77]!, 5_000_000n);
    const balances = await tokenBalancesAt(x, addresses, toHex(await head()));
    expect(balances[77]).toBe(5_000_000n);
    expect(balances.filter((b) => b !== 0n)).toEqual([5_000_000n]);
    const sizes = (await relayedRequests(tag)).map((r) => r.calls.length).sort((a, b) => a - b);
    expect(sizes).toEqual([10, 40, 40, 40]);
  });
});

describe("log searches within RPC_MAX_LOG_RANGE", () => {
  const transferTo = (address: Hex) => ({
    address: chain().token,
    topics: [
      encodeEventTopics({ abi: EIP3009_ABI, eventName: "Transfer" })[0]!,
      null,
      pad(address.toLowerCase() as Hex),
    ],
  });

  it("a search over a history longer than the cap is several eth_getLogs, none wider than the cap, covering it in order", async () => {
    await mine(35);
    const to = BigInt(await head());
    const from = to - 34n;
    const tag = relayTag();
    const x = settingsOf(envThrough(tag, { RPC_MAX_LOG_RANGE: "10" })).x402!;
    expect(await searchLogs(x, transferTo(freshAddress()), from, { to })).toEqual([]);
    const windows = await logSearches(tag);
    expect(windows).toEqual([
      { from: Number(from), to: Number(from) + 9 },
      { from: Number(from) + 10, to: Number(from) + 19 },
      { from: Number(from) + 20, to: Number(from) + 29 },
      { from: Number(from) + 30, to: Number(to) },
    ]);
  });

  it("a search longer than what the invocation may still send throws, never answers from part of the range", async () => {
    await mine(30);
    const to = BigInt(await head());
    const tag = relayTag();
    const x = settingsOf(envThrough(tag, { RPC_MAX_LOG_RANGE: "10" })).x402!;
    const small = new Invocation({ d1Queries: 900, subrequests: 2, rpcInFlight: 4 });
    await expect(
      runInvocation(small, () => searchLogs(x, transferTo(freshAddress()), to - 29n, { to })),
    ).rejects.toThrow("the invocation's subrequests ran out");
    expect(await logSearches(tag)).toHaveLength(2);
  });

  it("an authorization nobody used is unseen after a search from the recorded block to the head, window by window", async () => {
    await mine(15);
    const recorded = (await head()) - 5;
    const tag = relayTag();
    const x = settingsOf(envThrough(tag, { RPC_MAX_LOG_RANGE: "10" })).x402!;
    expect(await authorizationFate(x, freshAddress(), randomNonce(), recorded)).toEqual({ kind: "unseen" });
    const windows = await logSearches(tag);
    // From 100 blocks before the recorded one (the margin for a provider's nodes a little apart), to the head.
    expect(windows[0]!.from).toBe(Math.max(0, recorded - 100));
    expect(windows.at(-1)!.to).toBeGreaterThanOrEqual(recorded + 5);
    for (const w of windows) expect(w.to - w.from + 1).toBeLessThanOrEqual(10);
    for (let i = 1; i < windows.length; i++) expect(windows[i]!.from).toBe(windows[i - 1]!.to + 1);
  });

  it("a refused eth_getLogs is logged as an error with the method and the node's message, never the URL, and thrown", async () => {
    const nonce = randomNonce();
    const tag = relayTag();
    const x = settingsOf(envThrough(tag)).x402!;
    await refuseAtRelay({
      containing: nonce,
      method: "eth_getLogs",
      times: 1,
      message: "query exceeds max block range 1000",
      rpcErrorStatus: 400,
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    await expect(authorizationFate(x, freshAddress(), nonce, await head())).rejects.toThrow(
      "eth_getLogs: query exceeds max block range 1000",
    );
    const lines = errors.mock.calls.map((c) => JSON.parse(String(c[0])) as Record<string, unknown>);
    const refused = lines.filter((l) => l.where === "rpc_refused");
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ level: "error", method: "eth_getLogs" });
    expect(String(refused[0]!.message)).toContain("query exceeds max block range 1000");
    expect(JSON.stringify(lines)).not.toContain(chain().relayUrl);
    // Not "unseen": asked again, the node answers, and the search goes on.
    expect(await authorizationFate(x, freshAddress(), nonce, await head())).toEqual({ kind: "unseen" });
  });

  it("a refused batch is logged as an error and thrown, never answered as empty", async () => {
    const address = freshAddress();
    const x = settingsOf(envThrough(relayTag())).x402!;
    await refuseAtRelay({ containing: address, method: "eth_getBalance", times: 1, httpStatus: 413 });
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    await expect(
      rpcBatch(x, [
        { method: "eth_getBalance", params: [address, "latest"] },
        { method: "eth_blockNumber", params: [] },
      ]),
    ).rejects.toThrow("RPC answered HTTP 413");
    const refused = errors.mock.calls
      .map((c) => JSON.parse(String(c[0])) as Record<string, unknown>)
      .filter((l) => l.where === "rpc_refused");
    expect(refused).toEqual([expect.objectContaining({ level: "error", method: "batch", calls: 2 })]);
  });
});

describe("the treasury's holdings within the invocation's subrequests", () => {
  it("refuses a read it could not finish, before sending anything, and reads it whole with room", async () => {
    const tag = relayTag();
    const x = settingsOf(envThrough(tag)).x402!;
    const receiving = Array.from({ length: 250 }, freshAddress);
    // 250 addresses and the settlement address: 3 batches of at most 100, and the head first.
    const narrow = new Invocation({ d1Queries: 900, subrequests: 3, rpcInFlight: 4 });
    await expect(runInvocation(narrow, () => readHoldings(x, receiving))).rejects.toThrow(
      "250 unswept addresses need 4 requests",
    );
    expect(narrow.spent.subrequests).toBe(0);
    expect(await relayedRequests(tag)).toHaveLength(0);
    const room = new Invocation({ d1Queries: 900, subrequests: 4, rpcInFlight: 4 });
    const holdings = await runInvocation(room, () => readHoldings(x, receiving));
    expect(holdings).toMatchObject({ addressesRead: 250, depositAddressesBaseUnits: 0n });
    expect(room.spent.subrequests).toBe(4);
  });
});
