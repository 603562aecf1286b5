// x402 for the benchmark: payments signed as an x402 client signs them (EIP-3009
// TransferWithAuthorization, as test/helpers/x402.ts does), and the chain's own floor: the same
// settlement work the built-in facilitator does (estimate gas and fees, sign and send in nonce
// order from one gas account, poll for the receipt), driven straight at the local chain from here.
import { createPublicClient, defineChain, encodeFunctionData, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { anvilAccounts, LOCAL_CHAIN_ID } from "../lib/chain.mjs";
import { compileTestUsdc } from "../lib/contracts.mjs";

const TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
};

// The test token's own compiled ABI (cached by scripts/lib/contracts.mjs since npm run dev deployed it).
const EIP3009_ABI = compileTestUsdc().abi;

const randomNonce = () => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}`;

/** Payers: anvil accounts 1-8 (1,000 test tokens each). Account 9 pays gas for the chain floor; 0 is the service's. */
const payers = () => anvilAccounts().slice(1, 9).map((a) => privateKeyToAccount(a.privateKey));

/**
 * `n` signed authorizations for `terms` (one accepts[] entry of a 402 body), spread over the payers.
 * @returns {Promise<{ header: string, authorization: Record<string, string>, signature: `0x${string}` }[]>}
 */
export async function signPayments(terms, n) {
  const accounts = payers();
  const now = BigInt(Math.floor(Date.now() / 1000));
  const out = [];
  for (let i = 0; i < n; i++) {
    const signer = accounts[i % accounts.length];
    const message = { from: signer.address, to: terms.payTo, value: BigInt(terms.maxAmountRequired), validAfter: now - 600n, validBefore: now + 300n, nonce: randomNonce() };
    const signature = await signer.signTypedData({
      domain: { name: terms.extra.name, version: terms.extra.version, chainId: LOCAL_CHAIN_ID, verifyingContract: terms.asset },
      types: TYPES,
      primaryType: "TransferWithAuthorization",
      message,
    });
    const authorization = Object.fromEntries(Object.entries(message).map(([k, v]) => [k, typeof v === "bigint" ? v.toString() : v]));
    const payload = { x402Version: 1, scheme: "exact", network: terms.network, payload: { signature, authorization } };
    out.push({ header: Buffer.from(JSON.stringify(payload)).toString("base64"), authorization, signature });
  }
  return out;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Runs operations `concurrency` at a time for `seconds`; counts those that finished inside the
 * window. An operation that returns false has nothing left to do and ends its worker.
 */
async function closedLoop(concurrency, seconds, operation) {
  const latencies = [];
  let failures = 0;
  const end = Date.now() + seconds * 1000;
  const worker = async () => {
    while (Date.now() < end) {
      const t0 = performance.now();
      try {
        if ((await operation()) === false) return;
        if (Date.now() <= end) latencies.push(performance.now() - t0);
      } catch {
        if (Date.now() <= end) failures++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  latencies.sort((a, b) => a - b);
  return { latencies, failures, elapsed: seconds };
}

/** Polls for a receipt at once and then every 250 ms, as the service's `receiptWithin` does. */
async function receiptOf(client, hash) {
  for (let tries = 0; tries < 120; tries++) {
    try {
      return await client.getTransactionReceipt({ hash });
    } catch (error) {
      if (error?.name !== "TransactionReceiptNotFoundError") throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`no receipt for ${hash}`);
}

/**
 * The chain floor for settlement: what the local chain sustains for the built-in facilitator's
 * work per payment, with nonces and signatures serialized on one gas account exactly as the settler
 * object serializes them, and the sends and receipts outside that queue (polling every 250 ms, as it does).
 */
export async function chainSettleFloor({ rpcUrl, terms, concurrency, warmupSeconds, seconds, signed }) {
  const chain = defineChain({ id: LOCAL_CHAIN_ID, name: "local", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
  const gas = privateKeyToAccount(anvilAccounts()[9].privateKey);
  const client = createPublicClient({ chain, transport: http(rpcUrl) });
  let nextNonce = null;
  let fees = null;
  let tail = Promise.resolve();
  const serial = (fn) => {
    const run = tail.then(fn);
    tail = run.catch(() => undefined);
    return run;
  };
  let k = 0;
  const settleOne = async () => {
    if (k >= signed.length) return false;
    const p = signed[k++];
    const sig = p.signature;
    const r = `0x${sig.slice(2, 66)}`;
    const s = `0x${sig.slice(66, 130)}`;
    const v = parseInt(sig.slice(130, 132), 16);
    const a = p.authorization;
    const args = [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, v, r, s];
    // The service's chain reads, outside the queue: the payer's nonce and balance (verification),
    // then the gas estimate (which runs the transfer) and the fees (one estimate per 2 s, as the settler).
    await Promise.all([
      client.readContract({ address: terms.asset, abi: EIP3009_ABI, functionName: "authorizationState", args: [a.from, a.nonce] }),
      client.readContract({ address: terms.asset, abi: EIP3009_ABI, functionName: "balanceOf", args: [a.from] }),
    ]);
    if (!fees || Date.now() - fees.at >= 2000) fees = { at: Date.now(), estimate: client.estimateFeesPerGas() };
    const [limit, { maxFeePerGas, maxPriorityFeePerGas }] = await Promise.all([
      client.estimateContractGas({ account: gas, address: terms.asset, abi: EIP3009_ABI, functionName: "transferWithAuthorization", args }),
      fees.estimate,
    ]);
    const data = encodeFunctionData({ abi: EIP3009_ABI, functionName: "transferWithAuthorization", args });
    // The nonce and signature one at a time; the send leaves the queue as soon as it is on its way (as the settler's).
    const { sending } = await serial(async () => {
      nextNonce ??= await client.getTransactionCount({ address: gas.address, blockTag: "pending" });
      const serializedTransaction = await gas.signTransaction({ type: "eip1559", chainId: LOCAL_CHAIN_ID, to: terms.asset, data, gas: (limit * 12n) / 10n, maxFeePerGas, maxPriorityFeePerGas, nonce: nextNonce });
      nextNonce++;
      return { sending: client.sendRawTransaction({ serializedTransaction }) };
    });
    const hash = await sending;
    const receipt = await receiptOf(client, hash);
    if (receipt.status !== "success") throw new Error("reverted");
  };
  if (warmupSeconds > 0) await closedLoop(concurrency, warmupSeconds, settleOne);
  const { latencies, failures, elapsed } = await closedLoop(concurrency, seconds, settleOne);
  const mean = latencies.reduce((a, b) => a + b, 0) / Math.max(latencies.length, 1);
  return {
    requests: latencies.length + failures,
    ok: latencies.length,
    errors: failures,
    rps: (latencies.length + failures) / elapsed,
    okRps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? 0,
    mean,
    statuses: {},
    socketErrors: 0,
    timeouts: 0,
    seconds: elapsed,
    exhausted: k >= signed.length,
  };
}
