import { createServer, type Server } from "node:http";
import type { TestProject } from "vitest/node";
import { createWalletClient, http, parseSignature } from "viem";
import { privateKeyToAccount } from "viem/accounts";
// @ts-expect-error: plain JavaScript module shared with `npm run dev`
import { startLocalChain, x402Vars } from "../../scripts/lib/chain.mjs";

/**
 * A real local EVM chain for the x402 tests (anvil, chain id 84532, the
 * EIP-3009 test stablecoin), and a stand-in for a remote facilitator:
 * `POST /hang/settle` broadcasts the transfer on the real chain and then never
 * answers, as a facilitator that times out after broadcasting does.
 */
export interface TestChain {
  rpcUrl: string;
  chainId: number;
  token: `0x${string}`;
  payTo: `0x${string}`;
  accounts: { address: `0x${string}`; privateKey: `0x${string}` }[];
  vars: Record<string, string>;
  facilitatorUrl: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    chain: TestChain;
  }
}


let chain: { stop: () => Promise<void> } | undefined;
let facilitator: Server | undefined;

export async function setup(project: TestProject) {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const started = await startLocalChain({ port });
  chain = started;
  // The facilitator double pays gas from account 9, apart from the service's account 0, so their nonces never collide.
  const gasPayer = privateKeyToAccount(started.accounts[9].privateKey);
  const wallet = createWalletClient({ account: gasPayer, transport: http(started.rpcUrl) });
  facilitator = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      if (req.url === "/hang/verify") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ isValid: true }));
        return;
      }
      if (req.url === "/hang/settle") {
        const { authorization: a, signature } = body.paymentPayload.payload;
        const { r, s, v, yParity } = parseSignature(signature);
        await wallet.writeContract({
          chain: null,
          address: started.token,
          // The token's own compiled ABI, as the chain set-up deployed it.
          abi: started.abi,
          functionName: "transferWithAuthorization",
          args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, Number(v ?? BigInt((yParity ?? 0) + 27)), r, s],
        });
        return; // broadcast, then never answer
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => facilitator!.listen(0, "127.0.0.1", resolve));
  const address = facilitator.address();
  if (!address || typeof address === "string") throw new Error("facilitator double did not bind");
  project.provide("chain", {
    rpcUrl: started.rpcUrl,
    chainId: started.chainId,
    token: started.token,
    payTo: started.payTo,
    accounts: started.accounts,
    vars: x402Vars(started),
    facilitatorUrl: `http://127.0.0.1:${address.port}/hang/`,
  });
}

export async function teardown() {
  facilitator?.closeAllConnections();
  await new Promise<void>((resolve) => (facilitator ? facilitator.close(() => resolve()) : resolve()));
  await chain?.stop();
}
