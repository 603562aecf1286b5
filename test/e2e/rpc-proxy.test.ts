import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { createPublicClient, type Hex, http, parseAbiItem } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { startLocalChain } from "../../scripts/lib/chain.mjs";
import { type RpcProxyStats, startRpcProxy } from "../../scripts/lib/rpc-proxy.mjs";
import { freePort } from "./dev-server";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DEAD = "0x000000000000000000000000000000000000dEaD";
const TRANSFER = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");

interface Answer {
  jsonrpc: "2.0";
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

// `npm run chain:proxy` as a person runs it, in front of a real local chain (the token's mints are its
// logs): what a hosted provider refuses is refused in the provider's words, everything else is the node's
// answer, and GET /stats counts it all.
describe("npm run chain:proxy", () => {
  let chain: { rpcUrl: string; token: Hex; stop: () => Promise<void> };
  let proxy: ChildProcess;
  let url: string;
  let output = "";
  const rpc = async (body: unknown) => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Answer | Answer[] };
  };
  const call = (id: number, method: string, params: unknown[] = []) => ({ jsonrpc: "2.0", id, method, params });
  const stats = async () => (await (await fetch(`${url}/stats`)).json()) as RpcProxyStats;

  beforeAll(async () => {
    chain = await startLocalChain({ port: await freePort() });
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    proxy = spawn(
      "npm",
      [
        "run",
        "--silent",
        "chain:proxy",
        "--",
        ...["--upstream", chain.rpcUrl, "--port", String(port)],
        ...["--max-log-range", "10", "--max-batch", "3", "--max-log-results", "5"],
      ],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    proxy.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    proxy.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const deadline = Date.now() + 30_000;
    while (!output.includes(`[rpc-proxy] ${url} -> ${chain.rpcUrl}`)) {
      if (proxy.exitCode !== null || Date.now() > deadline) throw new Error(`the proxy did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  afterAll(async () => {
    if (proxy?.pid && proxy.exitCode === null) {
      process.kill(-proxy.pid, "SIGTERM");
      await new Promise((r) => proxy.once("exit", r));
    }
    await chain?.stop();
  });

  it("forwards a log search within the range cap and refuses a wider one as QuickNode does, resolving tags as providers do", async () => {
    const head = BigInt(((await rpc(call(1, "eth_blockNumber"))).body as Answer).result as string);
    expect(head).toBeGreaterThan(10n);
    const within = await rpc(
      // Blocks head-9 to head: 10 blocks (a "latest" here could be a block more by the time it is read).
      // An address with no logs: the mints near the head would be more than the result cap of 5.
      call(2, "eth_getLogs", [
        { address: DEAD, fromBlock: `0x${(head - 9n).toString(16)}`, toBlock: `0x${head.toString(16)}` },
      ]),
    );
    expect(within.status).toBe(200);
    expect((within.body as Answer).result).toEqual([]);
    // No fromBlock is the head: one block.
    expect(((await rpc(call(3, "eth_getLogs", [{ address: chain.token }]))).body as Answer).result).toBeInstanceOf(
      Array,
    );

    const refused = { code: -32614, message: "eth_getLogs is limited to a 10 range" };
    const wide = await rpc(
      call(4, "eth_getLogs", [{ fromBlock: `0x${(head - 10n).toString(16)}`, toBlock: `0x${head.toString(16)}` }]),
    );
    expect(wide).toEqual({ status: 200, body: { jsonrpc: "2.0", id: 4, error: refused } });
    // "earliest" is block 0; a missing toBlock is the head.
    expect((await rpc(call(5, "eth_getLogs", [{ fromBlock: "earliest" }]))).body).toEqual({
      jsonrpc: "2.0",
      id: 5,
      error: refused,
    });

    // viem sees the provider's error, as the service's client would.
    const client = createPublicClient({ transport: http(url) });
    const error = await client.getLogs({ fromBlock: 0n, toBlock: head }).catch((e: unknown) => e);
    expect(String(error)).toContain("eth_getLogs is limited to a 10 range");

    const counted = await stats();
    expect(counted.refused).toEqual({ logRange: 3, batch: 0, logResults: 0 });
    expect(counted.largestLogRange).toBe(10);
    expect(counted.largestLogRangeAsked).toBe(Number(head) + 1);
    expect(counted.refusals.map((r) => r.blocks)).toEqual([11, Number(head) + 1, Number(head) + 1]);
  });

  it("refuses a batch over the batch cap as geth does, and answers a smaller one call by call, an over-range search refused in its place", async () => {
    await fetch(`${url}/stats/reset`, { method: "POST" });
    const four = await rpc([
      call(7, "eth_chainId"),
      call(8, "eth_chainId"),
      call(9, "eth_chainId"),
      call(10, "eth_chainId"),
    ]);
    expect(four).toEqual({
      status: 200,
      body: [{ jsonrpc: "2.0", id: 7, error: { code: -32600, message: "batch too large" } }],
    });
    const three = await rpc([
      call(11, "eth_chainId"),
      call(12, "eth_getLogs", [{ fromBlock: "earliest", toBlock: "latest" }]),
      call(13, "eth_blockNumber"),
    ]);
    expect(three.status).toBe(200);
    const answers = three.body as Answer[];
    expect(answers.map((a) => a.id)).toEqual([11, 12, 13]);
    expect(answers[0]!.result).toBe("0x14a34");
    expect(answers[1]!.error).toEqual({ code: -32614, message: "eth_getLogs is limited to a 10 range" });
    expect(answers[2]!.result).toMatch(/^0x[0-9a-f]+$/);

    const counted = await stats();
    expect(counted).toMatchObject({
      requests: 2,
      calls: 7,
      batches: 2,
      largestBatch: 4,
      refused: { logRange: 1, batch: 1, logResults: 0 },
    });
    expect(counted.byMethod).toEqual({ eth_chainId: 5, eth_getLogs: 1, eth_blockNumber: 1 });
  });

  it("refuses an answer of more logs than the result cap as Infura does", async () => {
    // The mints of the chain's start, read from the node itself.
    const node = createPublicClient({ transport: http(chain.rpcUrl) });
    const mints = await node.getLogs({ address: chain.token, event: TRANSFER, fromBlock: 0n });
    const from = mints[0]!.blockNumber;
    const to = from + 9n;
    const inRange = mints.filter((log) => log.blockNumber <= to).length;
    expect(inRange).toBeGreaterThan(5);
    const answer = await rpc(
      call(14, "eth_getLogs", [
        { address: chain.token, fromBlock: `0x${from.toString(16)}`, toBlock: `0x${to.toString(16)}` },
      ]),
    );
    expect(answer.body).toEqual({
      jsonrpc: "2.0",
      id: 14,
      error: {
        code: -32005,
        data: { from: `0x${from.toString(16)}`, limit: 5, to: `0x${to.toString(16)}` },
        message: `query returned more than 5 results. Try with this block range [0x${from.toString(16)}, 0x${to.toString(16)}].`,
      },
    });
    expect((await stats()).refused.logResults).toBe(1);
  });

  it("refuses as Alchemy does with --style alchemy (HTTP 400, the range that would work), and only counts what is over the caps when they are not enforced", async () => {
    const alchemy = await startRpcProxy({ upstream: chain.rpcUrl, maxLogRange: 10, style: "alchemy" });
    const observing = await startRpcProxy({ upstream: chain.rpcUrl, maxLogRange: 10, maxBatch: 1, enforce: false });
    try {
      const wide = await fetch(alchemy.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(call(15, "eth_getLogs", [{ fromBlock: "0x2", toBlock: "0x20" }])),
      });
      expect(wide.status).toBe(400);
      expect(await wide.json()).toEqual({
        jsonrpc: "2.0",
        id: 15,
        error: {
          code: -32600,
          message:
            "You can make eth_getLogs requests with up to a 10 block range. Based on your parameters, this block range should work: [0x2, 0xb]",
        },
      });

      const both = await fetch(observing.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify([call(16, "eth_getLogs", [{ fromBlock: "earliest" }]), call(17, "eth_chainId")]),
      });
      const answers = (await both.json()) as Answer[];
      expect(answers.map((a) => a.error)).toEqual([undefined, undefined]);
      expect(observing.stats()).toMatchObject({
        refused: { logRange: 0, batch: 0, logResults: 0 },
        overCaps: { logRange: 1, batch: 1 },
      });
    } finally {
      await alchemy.close();
      await observing.close();
    }
  });
});
