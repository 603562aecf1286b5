// x402 for the benchmark: payments signed as an x402 client signs them (EIP-3009
// TransferWithAuthorization, as test/helpers/x402.ts does), and the chain's own floor: the same
// settlement work the built-in facilitator does (estimate gas and fees, sign and send in nonce
// order from as many gas accounts as it has lanes, poll for the receipt), driven straight at the
// local chain from here.
import { createPublicClient, defineChain, encodeFunctionData, formatTransactionReceipt, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { anvilAccounts, GAS_LANES, giveGas, LOCAL_CHAIN_ID, mnemonicKey } from "../lib/chain.mjs";
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

/** Payers: anvil accounts 1-8 (1,000 test tokens each). The service pays gas from GAS_LANES, the chain floor from `floorLanes`. */
const payers = () =>
  anvilAccounts()
    .slice(1, 9)
    .map((a) => privateKeyToAccount(a.privateKey));

/** An EIP-3009 authorization of `value` from `signer` to `to` on the token of `terms`, valid for five minutes. */
async function signAuthorization(signer, terms, to, value) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = {
    from: signer.address,
    to,
    value,
    validAfter: now - 600n,
    validBefore: now + 300n,
    nonce: randomNonce(),
  };
  const signature = await signer.signTypedData({
    domain: {
      name: terms.extra.name,
      version: terms.extra.version,
      chainId: LOCAL_CHAIN_ID,
      verifyingContract: terms.asset,
    },
    types: TYPES,
    primaryType: "TransferWithAuthorization",
    message,
  });
  const authorization = Object.fromEntries(
    Object.entries(message).map(([k, v]) => [k, typeof v === "bigint" ? v.toString() : v]),
  );
  return { authorization, signature };
}

/**
 * One signed authorization for each of `termsList` (accepts[] entries of 402 bodies: each charge has
 * its own receiving address, which the authorization names), spread over the payers.
 * @returns {Promise<{ header: string, authorization: Record<string, string>, signature: `0x${string}` }[]>}
 */
export async function signPayments(termsList) {
  const accounts = payers();
  const out = [];
  for (const [i, terms] of termsList.entries()) {
    const signer = accounts[i % accounts.length];
    const { authorization, signature } = await signAuthorization(
      signer,
      terms,
      terms.payTo,
      BigInt(terms.maxAmountRequired),
    );
    const payload = { x402Version: 1, scheme: "exact", network: terms.network, payload: { signature, authorization } };
    out.push({ header: Buffer.from(JSON.stringify(payload)).toString("base64"), authorization, signature });
  }
  return out;
}

/**
 * `count` authorizations of `value` base units from the key `from` (the service's settlement key) to
 * `to`, on the token of `terms`: the transfers payouts send, for the chain floor to send instead.
 * @returns {Promise<{ authorization: Record<string, string>, signature: `0x${string}` }[]>}
 */
export async function signTransfers({ from, to, value, count, terms }) {
  const signer = privateKeyToAccount(from);
  const out = [];
  for (let i = 0; i < count; i++) out.push(await signAuthorization(signer, terms, to, value));
  return out;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Runs operations `concurrency` at a time until one returns false (nothing left to do); the
 * elapsed time runs from the start to the last one that finished.
 */
async function closedLoop(concurrency, operation) {
  const latencies = [];
  let failures = 0;
  let firstError = null;
  const began = performance.now();
  const worker = async () => {
    for (;;) {
      const t0 = performance.now();
      try {
        if ((await operation()) === false) return;
        latencies.push(performance.now() - t0);
      } catch (error) {
        failures++;
        firstError ??= String(error?.shortMessage ?? error?.message ?? error).slice(0, 300);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  latencies.sort((a, b) => a - b);
  return { latencies, failures, firstError, elapsed: (performance.now() - began) / 1000 };
}

/**
 * The local chain's state as it is now, to come back to: anvil's cost per settlement grows with
 * the token's storage (every settlement adds a used-nonce slot, and each block's state root is
 * computed over all of it), so a chain floor and the service are measured from the same state.
 * Reverting also undoes whatever the service sent meanwhile (a sweep on the cron, say), and its
 * settler lanes would then wait on nonces the chain no longer has: revert says how many it undid.
 * @returns {Promise<() => Promise<number>>} reverts to it (once); the service's transactions undone
 */
export async function chainSnapshot(rpcUrl) {
  const [taken] = await rpcBatch(rpcUrl, [{ method: "evm_snapshot", params: [] }]);
  if (taken.error) throw new Error(`evm_snapshot: ${taken.error.message}`);
  const sentBefore = await serviceSends(rpcUrl);
  return async () => {
    const undone = (await serviceSends(rpcUrl)) - sentBefore;
    const [reverted] = await rpcBatch(rpcUrl, [{ method: "evm_revert", params: [taken.result] }]);
    if (reverted.error || reverted.result !== true)
      throw new Error(`evm_revert: ${reverted.error?.message ?? reverted.result}`);
    return undone;
  };
}

/** How many transactions the service's gas keys (its settler lanes) have sent, pending ones included. */
async function serviceSends(rpcUrl) {
  const addresses = GAS_LANES.map((i) => privateKeyToAccount(mnemonicKey(i)).address);
  const counts = await rpcBatch(
    rpcUrl,
    addresses.map((address) => ({ method: "eth_getTransactionCount", params: [address, "pending"] })),
  );
  return counts.reduce((sum, c) => {
    if (c.error) throw new Error(`eth_getTransactionCount: ${c.error.message}`);
    return sum + Number(BigInt(c.result));
  }, 0);
}

/** Several JSON-RPC calls in one HTTP request, answers in call order. */
async function rpcBatch(rpcUrl, calls) {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(calls.map((c, id) => ({ jsonrpc: "2.0", id, ...c }))),
  });
  const answers = await res.json();
  return calls.map((_, id) => answers.find((x) => x.id === id) ?? { error: { message: "no answer" } });
}

/** Reads the receipt at once, then after 25, 50, 100, 200 ms and every 250 ms, as the service's `receiptWithin` does. */
async function receiptOf(client, hash) {
  for (let tries = 0, wait = 25; tries < 120; tries++, wait = Math.min(wait * 2, 250)) {
    const receipt = await client.request({ method: "eth_getTransactionReceipt", params: [hash] });
    if (receipt) return formatTransactionReceipt(receipt);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  throw new Error(`no receipt for ${hash}`);
}

/**
 * The floor's gas accounts, as many as the service has lanes: account 9 and the mnemonic's accounts
 * after the service's last (so their nonces never mix), funded with gas here. Each
 * is a lane of its own: its nonces and signatures one at a time, each send after the node answered
 * the one before, as a settler object does.
 */
async function floorLanes(client, count) {
  const keys = [
    anvilAccounts()[9].privateKey,
    ...Array.from({ length: count - 1 }, (_, i) => mnemonicKey(Math.max(...GAS_LANES) + 1 + i)),
  ];
  return Promise.all(
    keys.map(async (key) => {
      const gas = privateKeyToAccount(key);
      await giveGas(client, gas.address);
      let tail = Promise.resolve();
      const serial = (fn) => {
        const run = tail.then(fn);
        tail = run.catch(() => undefined);
        return run;
      };
      return { gas, serial, nextNonce: null, lastSend: Promise.resolve(), inFlight: new Set() };
    }),
  );
}

/**
 * The chain floor for settlement: what the local chain sustains for the built-in facilitator's
 * work per payment, with nonces and signatures serialized per gas account exactly as a settler
 * object serializes them, over as many accounts as the service has lanes, and the sends and receipts
 * outside that queue (polling as it does).
 * `warmup` settlements first, then `count` measured ones, `concurrency` at a time. The fees are
 * asked again when over `feesMaxAgeMs` old (x402's shared estimate: 2 s; a payout asks each time).
 */
export async function chainSettleFloor({ rpcUrl, terms, concurrency, warmup, count, signed, feesMaxAgeMs = 2000 }) {
  if (signed.length < warmup + count)
    throw new Error(`the chain floor needs ${warmup + count} signed payments, got ${signed.length}`);
  const chain = defineChain({
    id: LOCAL_CHAIN_ID,
    name: "local",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const client = createPublicClient({ chain, transport: http(rpcUrl) });
  const lanes = await floorLanes(client, GAS_LANES.length);
  let fees = null;
  let k = 0;
  let until = warmup;
  const settleOne = async () => {
    if (k >= until) return false;
    const index = k++;
    const p = signed[index];
    const sig = p.signature;
    const r = `0x${sig.slice(2, 66)}`;
    const s = `0x${sig.slice(66, 130)}`;
    const v = parseInt(sig.slice(130, 132), 16);
    const a = p.authorization;
    const args = [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, v, r, s];
    const data = encodeFunctionData({ abi: EIP3009_ABI, functionName: "transferWithAuthorization", args });
    // The service's chain check, outside the queue, in one JSON-RPC batch as `checkTransfer` (and a
    // payout's `checkOutbound`) sends it: the payer's nonce state and balance, the gas estimate
    // (which runs the transfer) and, when the estimate is over `feesMaxAgeMs` old, the fees.
    const call = (functionName, callArgs) => ({
      method: "eth_call",
      params: [
        { to: terms.asset, data: encodeFunctionData({ abi: EIP3009_ABI, functionName, args: callArgs }) },
        "latest",
      ],
    });
    const calls = [
      call("authorizationState", [a.from, a.nonce]),
      call("balanceOf", [a.from]),
      { method: "eth_estimateGas", params: [{ from: lanes[0].gas.address, to: terms.asset, data }, "latest"] },
    ];
    const feesStale = !fees || Date.now() - fees.at >= feesMaxAgeMs;
    if (feesStale)
      calls.push(
        { method: "eth_getBlockByNumber", params: ["latest", false] },
        { method: "eth_maxPriorityFeePerGas", params: [] },
      );
    const answers = await rpcBatch(rpcUrl, calls);
    const failed = answers.find((x) => x.error);
    if (failed) throw new Error(failed.error.message);
    if (BigInt(answers[0].result) !== 0n || BigInt(answers[1].result) < BigInt(a.value))
      throw new Error("the payment does not verify");
    const limit = BigInt(answers[2].result);
    if (feesStale) {
      const tip = BigInt(answers[4].result);
      fees = {
        at: Date.now(),
        maxFeePerGas: (BigInt(answers[3].result.baseFeePerGas) * 12n + 9n) / 10n + tip,
        maxPriorityFeePerGas: tip,
      };
    }
    const { maxFeePerGas, maxPriorityFeePerGas } = fees;
    // The nonce and signature one at a time; the send leaves the queue once it is queued behind the
    // one before it, and goes to the node when that one was answered (as the settler's).
    // Over the lanes in turn, as the built-in facilitator spreads its settlements.
    const lane = lanes[index % lanes.length];
    const { sending } = await lane.serial(async () => {
      if (lane.nextNonce === null) {
        await Promise.allSettled([...lane.inFlight]);
        lane.nextNonce = await client.getTransactionCount({ address: lane.gas.address, blockTag: "pending" });
        lane.lastSend = Promise.resolve();
      }
      const nonce = lane.nextNonce++;
      const serializedTransaction = await lane.gas.signTransaction({
        type: "eip1559",
        chainId: LOCAL_CHAIN_ID,
        to: terms.asset,
        data,
        gas: (limit * 12n) / 10n,
        maxFeePerGas,
        maxPriorityFeePerGas,
        nonce,
      });
      const sending = lane.lastSend.then(() => client.sendRawTransaction({ serializedTransaction }));
      lane.lastSend = sending;
      lane.inFlight.add(sending);
      sending.then(
        () => lane.inFlight.delete(sending),
        () => {
          lane.inFlight.delete(sending);
          lane.nextNonce = null;
        },
      );
      return { sending };
    });
    const hash = await sending;
    const receipt = await receiptOf(client, hash);
    if (receipt.status !== "success") throw new Error("reverted");
  };
  if (warmup > 0) await closedLoop(concurrency, settleOne);
  until = warmup + count;
  const { latencies, failures, firstError, elapsed } = await closedLoop(concurrency, settleOne);
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
    firstError,
  };
}

const AUTHORIZATION_USED = "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5";

/**
 * Gas per settlement in blocks `from`..`to` (hex or numbers): every AuthorizationUsed the token
 * logged there, and the gas of the transactions that carried them (a batch carries several).
 * @returns {Promise<{ settlements: number, transactions: number, gasPerSettlement: number | null }>}
 */
export async function settlementGas(rpcUrl, token, from, to) {
  const hex = (n) => `0x${BigInt(n).toString(16)}`;
  const [logs] = await rpcBatch(rpcUrl, [
    {
      method: "eth_getLogs",
      params: [{ address: token, topics: [AUTHORIZATION_USED], fromBlock: hex(from), toBlock: hex(to) }],
    },
  ]);
  const hashes = [...new Set((logs.result ?? []).map((l) => l.transactionHash))];
  let gas = 0n;
  for (let i = 0; i < hashes.length; i += 100) {
    const receipts = await rpcBatch(
      rpcUrl,
      hashes.slice(i, i + 100).map((hash) => ({ method: "eth_getTransactionReceipt", params: [hash] })),
    );
    for (const r of receipts) gas += BigInt(r.result.gasUsed);
  }
  const settlements = (logs.result ?? []).length;
  return {
    settlements,
    transactions: hashes.length,
    gasPerSettlement: settlements > 0 ? Number(gas / BigInt(settlements)) : null,
  };
}

/** The chain's latest block number. */
export async function blockNumber(rpcUrl) {
  const [answer] = await rpcBatch(rpcUrl, [{ method: "eth_blockNumber", params: [] }]);
  return BigInt(answer.result);
}
