import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createWalletClient, type Hex, http, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { anchoredLogsFilter, anchorsIn, type OnChainAnchor } from "../../src/audit/anchor-abi";
import type { Env } from "../../src/config/env";
import worker from "../../src/index";
import { gasAccountOf } from "../../src/x402/transfer";
import { BASE, consoleToken } from "./api";
import { chain, publicClient } from "./x402";

/** The gas addresses the Worker sends anchors from (its FACILITATOR_PRIVATE_KEY). */
export const gasAddresses = () =>
  env.FACILITATOR_PRIVATE_KEY!.split(",").map((k) => gasAccountOf(k.trim() as Hex).address.toLowerCase() as Hex);

/**
 * A fresh AuditAnchor contract of this test file's own: every file's D1 starts its chain at seq 1,
 * so anchors of one contract shared across files would say different things about the same seq.
 */
export async function deployAnchor(): Promise<Hex> {
  const account = privateKeyToAccount(generatePrivateKey());
  await publicClient().request({
    method: "anvil_setBalance" as never,
    params: [account.address, toHex(10n ** 18n)] as never,
  });
  const wallet = createWalletClient({ account, transport: http(chain().rpcUrl) });
  const { abi, bytecode } = chain().auditAnchor;
  const hash = await wallet.deployContract({ abi, bytecode, chain: null });
  const receipt = await publicClient().waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return receipt.contractAddress!.toLowerCase() as Hex;
}

/** The Worker's env with checkpoints anchored on `contract`. */
export const anchoredEnv = (contract: Hex) => ({ ...env, AUDIT_ANCHOR_ADDRESS: contract }) as Env;

/**
 * Every anchor the service's gas addresses sent to `contract`, read from the chain itself (the node,
 * not the relay: the test's own read of the whole chain, which no provider cap applies to); of one
 * anchored seq if given (a shard k ≥ 1's checkpoint is anchored as anchorSeqOf(k, seq)).
 */
export async function anchorsOn(contract: Hex, seq?: number | bigint): Promise<OnChainAnchor[]> {
  await minedWhatWasSent();
  const logs = await publicClient().request({
    method: "eth_getLogs" as never,
    params: [{ ...anchoredLogsFilter(contract, gasAddresses(), seq), fromBlock: "0x0", toBlock: "latest" }] as never,
  });
  return anchorsIn(logs as Parameters<typeof anchorsIn>[0], contract);
}

/**
 * Waits (2 s at most) until the local chain has mined every transaction it took: anvil answers a send
 * before it seals the block, so a test that reads the chain right after the service sent may be early.
 */
async function minedWhatWasSent() {
  for (let i = 0; i < 80; i++) {
    const status = (await publicClient().request({ method: "txpool_status" as never })) as { pending: Hex };
    if (BigInt(status.pending) === 0n) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A call through the Worker's fetch handler with `workerEnv` (another anchor contract than the default none). */
export async function callWith(workerEnv: Env, method: string, path: string, token: string) {
  const ctx = createExecutionContext();
  const response = await worker.fetch!(
    new Request(`${BASE}${path}`, { method, headers: { authorization: `Bearer ${token}` } }) as never,
    workerEnv,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

/** A console call through the Worker's fetch handler with `workerEnv`. */
export const consoleCall = async (workerEnv: Env, method: string, path: string) =>
  callWith(workerEnv, method, path, await consoleToken());
