// The local EVM chain (docs/operations.md#local): anvil with chain id 84532 (standing in
// for Base Sepolia), the EIP-3009 test stablecoin deployed, 1,000 tokens minted
// to default accounts 1-9, accounts 0 and 11-13 as the facilitator's gas payers, and the audit
// checkpoints' anchoring contract (contracts/AuditAnchor.sol).
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { mnemonicToSeedSync } from "@scure/bip39";
import { createPublicClient, createWalletClient, defineChain, http } from "viem";
import { HDKey, hdKeyToAccount, privateKeyToAccount } from "viem/accounts";
import {
  ChainStateError,
  chainFiles,
  keepSaving,
  keptAnvilAt,
  logTail,
  newestState,
  savedHead,
  spawnKeptAnvil,
  stopAnvil,
} from "./chain-state.mjs";
import { compileAuditAnchor, compileSettlementBatch, compileTestUsdc } from "./contracts.mjs";

export const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
export const LOCAL_CHAIN_ID = 84532;
export const MINT_PER_ACCOUNT = 1_000_000_000n; // 1,000 tokens of 6 decimals
/** What the settlement address starts with, so payouts of ledger-funded balances work offline. */
export const SETTLEMENT_FLOAT = 100_000_000_000n; // 100,000 tokens

// The Linux x64 build from npm (the wrapper package @foundry-rs/anvil lists platform builds this registry does
// not carry, which breaks `npm ci`); the project's machines and CI are Linux x64.
const anvilBin = fileURLToPath(new URL("../../node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil", import.meta.url));

/**
 * The anvil mnemonic's root key, derived once: the seed is 2,048 rounds of PBKDF2 in JavaScript
 * (about 0.3 s), which deriving each account from the mnemonic would pay again for every account.
 */
let anvilRoot = null;
const anvilAccount = (addressIndex) => {
  anvilRoot ??= HDKey.fromMasterSeed(mnemonicToSeedSync(ANVIL_MNEMONIC));
  return hdKeyToAccount(anvilRoot, { addressIndex });
};

/** The private key of the anvil mnemonic's account `addressIndex`. */
export function mnemonicKey(addressIndex) {
  return `0x${Buffer.from(anvilAccount(addressIndex).getHdKey().privateKey).toString("hex")}`;
}

/** The default anvil accounts 0-9, with their private keys. */
export function anvilAccounts() {
  return Array.from({ length: 10 }, (_, addressIndex) => {
    const privateKey = mnemonicKey(addressIndex);
    return { address: privateKeyToAccount(privateKey).address, privateKey };
  });
}

/**
 * The built-in facilitator's gas keys: account 0 and accounts 11-13 of the same mnemonic (10 is
 * the service's payTo; payers use 1-8, test doubles and the bench's chain floor 9). Several keys
 * are several settlement lanes, as docs/scaling.md describes for production.
 */
export const GAS_LANES = [0, 11, 12, 13];

/** Sets `address`'s native balance to 10,000 ETH on the local chain (anvil only): gas for a key anvil does not fund. */
export const giveGas = (client, address) =>
  client.request({ method: "anvil_setBalance", params: [address, `0x${(10_000n * 10n ** 18n).toString(16)}`] });

async function chainIdAt(rpcUrl) {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    return Number(BigInt((await res.json()).result));
  } catch {
    return null;
  }
}

const deployed = async (client, address) => {
  if (!address) return false;
  const code = await client.getCode({ address });
  return !!code && code !== "0x";
};

/**
 * The token, anchor and batch contract this chain already has from an earlier start (remembered in `file`); each null if not.
 * With them, the transactions that funded the settlement address then (`fundingTransactions`), to be booked again.
 */
async function remembered(file, rpcUrl, client) {
  const none = { token: null, anchor: null, batch: null, fundingTransactions: [] };
  if (!file || !existsSync(file)) return none;
  try {
    const saved = JSON.parse(readFileSync(file, "utf8"));
    const genesis = await client.getBlock({ blockNumber: 0n });
    if (saved.genesis !== genesis.hash) return none;
    // The same chain at another port (a kept chain started again with another ANVIL_PORT): remembered there now.
    if (saved.rpcUrl !== rpcUrl) writeFileSync(file, JSON.stringify({ ...saved, rpcUrl }));
    return {
      token: (await deployed(client, saved.token)) ? saved.token : null,
      anchor: (await deployed(client, saved.anchor)) ? saved.anchor : null,
      batch: (await deployed(client, saved.batch)) ? saved.batch : null,
      fundingTransactions: saved.fundingTransactions ?? [],
    };
  } catch {
    return none;
  }
}

/** A history mined in this process, by its length: the state anvil dumped right after mining it. */
const minedHistories = new Map();

/** One JSON-RPC call to `rpcUrl` with a minute to answer (mining blocks on a busy machine outlasts viem's 10 s), never retried. */
async function slowCall(rpcUrl, method, params = []) {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(60_000),
  });
  const body = await res.json();
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

/**
 * Mines empty blocks until the chain's head is at least `blocks` (anvil only), with no time between
 * them: the chain's clock stays the wall clock's, which the x402 authorizations' validity is read against.
 * anvil mines a few hundred blocks a second, so a few thousand cost seconds; the tests start several
 * chains at once, so a chain just started (`fresh`: nothing on it but empty blocks) takes the history
 * another chain of this process mined (anvil_dumpState, then anvil_loadState: at once) rather than
 * mining its own. The first fresh chain to ask mines it for the others.
 */
export async function mineHistory(rpcUrl, blocks, log = () => {}, { fresh = false } = {}) {
  if (!blocks) return;
  const target = BigInt(blocks);
  const shared = fresh ? minedHistories.get(blocks) : undefined;
  if (shared) {
    await slowCall(rpcUrl, "anvil_loadState", [await shared]);
    log(`the chain starts with ${blocks} empty blocks (the history another chain mined)`);
    return;
  }
  let mined = null;
  if (fresh) {
    // Claimed before anything is awaited: fresh chains starting at the same moment wait for this one's.
    const settle = {};
    mined = new Promise((resolve, reject) => Object.assign(settle, { resolve, reject }));
    mined.catch(() => minedHistories.delete(blocks));
    minedHistories.set(blocks, mined);
    mined.settle = settle;
  }
  try {
    const headOf = async () => BigInt(await slowCall(rpcUrl, "eth_blockNumber"));
    const head = await headOf();
    // In steps of 250 blocks, each mined once (a step whose answer is lost is not sent again: the head says).
    for (let at = head; at < target; at = await headOf()) {
      const step = target - at < 250n ? target - at : 250n;
      await slowCall(rpcUrl, "anvil_mine", [`0x${step.toString(16)}`, "0x0"]);
    }
    if (mined) mined.settle.resolve(await slowCall(rpcUrl, "anvil_dumpState"));
    log(
      `mined ${target > head ? target - head : 0n} empty blocks: the chain's history is ${blocks} blocks before its contracts`,
    );
  } catch (error) {
    mined?.settle.reject(error);
    throw error;
  }
}

/** Deploys a compiled contract from `wallet`; its address. */
export async function deployCompiled(wallet, client, { abi, bytecode }) {
  const hash = await wallet.deployContract({ abi, bytecode });
  const { contractAddress } = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  return contractAddress;
}

/** Deploys the audit checkpoints' anchoring contract from `wallet`; its address. */
export const deployAuditAnchor = (wallet, client) => deployCompiled(wallet, client, compileAuditAnchor());

/**
 * Starts anvil on 127.0.0.1:`port` unless a chain already answers there, then
 * deploys the token and mints. On a chain that already answers, the token it
 * got from an earlier start (remembered in `rememberIn`) is used again rather
 * than a new one: what the service sent on the old token (a payout whose answer
 * was lost in a restart) must be found there, never sent again on a new one.
 *
 * With `keepIn` (a directory), the chain is kept there (scripts/lib/chain-state.mjs): anvil runs in a
 * session of its own and its state is saved, so the chain outlives a kill of the caller's process
 * group (the next start finds it running and takes it over) and a stop (the next start loads it).
 * `check(rpcUrl, { kept })`, once the chain answers and before anything is sent to it, may throw to
 * refuse it. `stop()` ends only what this call started or took over.
 *
 * With `history` (a block count), a chain that gets its token now is first given that many empty blocks,
 * so it has a past longer than a provider's `eth_getLogs` range cap, as a real chain has before the
 * service's contracts are deployed: a log search from block 0 then spans more than a provider serves.
 */
export async function startLocalChain({
  port = 8545,
  log = () => {},
  rememberIn = null,
  keepIn = null,
  check = null,
  history = 0,
} = {}) {
  const rpcUrl = `http://127.0.0.1:${port}`;
  let child = null;
  const existing = await chainIdAt(rpcUrl);
  const kept = keepIn ? chainFiles(keepIn) : null;
  /** The kept anvil: left running for this directory by an earlier start, or started below. */
  let keptPid = existing !== null && kept ? keptAnvilAt(kept, port) : null;
  /** The block the kept chain's last save reached (null: no save yet). */
  let fromSave = keptPid ? savedHead(kept) : null;
  if (existing !== null) {
    if (existing !== LOCAL_CHAIN_ID)
      throw new Error(`a chain with id ${existing} answers at ${rpcUrl}; expected ${LOCAL_CHAIN_ID}`);
    log(`using the chain already running at ${rpcUrl}${keptPid ? ` (anvil ${keptPid}, kept in ${keepIn})` : ""}`);
  } else {
    log(`starting anvil (chain id ${LOCAL_CHAIN_ID}) at ${rpcUrl}`);
    // Each transaction is mined at once, and an empty block every 2 s keeps the chain's clock current, as
    // on Base. With transactions alone, an idle chain's latest block grows old, and the dry run of a
    // transfer (which the service runs at the latest block) refuses what x402-fetch 1.x signs, valid
    // from 10 minutes ago, as "not yet valid" once the chain has been idle for 10 minutes.
    const mining = ["--block-time", "2", "--mixed-mining"];
    const where = ["--host", "127.0.0.1", "--port", String(port), "--chain-id", String(LOCAL_CHAIN_ID)];
    // States beyond memory go to ~/.foundry/anvil/tmp, which an anvil that is killed (tests, a crashed
    // dev server) never cleans: over days of runs that filled a 250 GB disk. Old states are dropped
    // instead; the service reads logs and receipts from history, and state only at the latest block.
    const history = ["--prune-history", "1024"];
    const args = [...where, ...mining, ...history, "--silent"];
    if (kept) {
      // The chain this directory kept running at another port (ANVIL_PORT changed): stopped, it dumps its state for this one.
      const elsewhere = keptAnvilAt(kept, null);
      if (elsewhere) {
        log(`stopping the chain this state directory kept at another port (anvil ${elsewhere})`);
        await stopAnvil(elsewhere);
      }
      fromSave = newestState(kept);
      if (fromSave !== null) log(`the chain comes back from its saved state ${kept.saved} (block ${fromSave})`);
      child = spawnKeptAnvil(anvilBin, args, kept);
      keptPid = child.pid;
    } else child = spawn(anvilBin, args, { stdio: "ignore" });
    const deadline = Date.now() + 20_000;
    while ((await chainIdAt(rpcUrl)) === null) {
      if (child.exitCode !== null) {
        const reason = `anvil exited with ${child.exitCode}${kept ? `: ${logTail(kept)}` : ""}`;
        throw fromSave !== null ? new ChainStateError(`${reason}\n(loading ${kept.saved})`) : new Error(reason);
      }
      if (Date.now() > deadline) throw new Error("anvil did not start within 20 s");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const saving = keptPid ? keepSaving(rpcUrl, kept, fromSave) : null;
  /** Ends what this call started or took over; a chain that runs apart from it stays. */
  const own = {
    /** At once and synchronously, for exit handlers (a kept anvil still dumps its state as it exits). */
    kill: () => {
      if (keptPid) {
        try {
          process.kill(keptPid, "SIGTERM");
        } catch {
          // already gone
        }
      } else if (child && child.exitCode === null) child.kill("SIGTERM");
    },
    stop: async () => {
      await saving?.stop();
      if (keptPid) await stopAnvil(keptPid);
      else if (child && child.exitCode === null) {
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
    },
  };
  if (check) {
    try {
      await check(rpcUrl, { kept: keptPid !== null });
    } catch (error) {
      await own.stop();
      throw error;
    }
  }
  const chain = defineChain({
    id: LOCAL_CHAIN_ID,
    name: "local",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const accounts = anvilAccounts();
  const deployer = privateKeyToAccount(accounts[0].privateKey);
  const wallet = createWalletClient({ account: deployer, chain, transport: http(rpcUrl) });
  const client = createPublicClient({ chain, transport: http(rpcUrl) });
  const { abi, bytecode } = compileTestUsdc();
  const payTo = anvilAccount(10).address;
  const facilitatorKeys = GAS_LANES.map((addressIndex) => mnemonicKey(addressIndex));
  const started = (token, { anchor, batch, fundingTransactions }) => ({
    rpcUrl,
    chainId: LOCAL_CHAIN_ID,
    token,
    abi,
    /** The audit checkpoints' anchoring contract. */
    anchor,
    /** The contract that settles several x402 authorizations in one transaction. */
    batch,
    /** The mint of the settlement address's float: `npm run dev` books it as the operator's funding. */
    fundingTransactions,
    payTo,
    /** The settlement address's key: it signs payouts and x402 refunds (anvil's account 10). */
    settlementKey: mnemonicKey(10),
    /** One settlement lane each (FACILITATOR_PRIVATE_KEY takes them separated by commas). */
    facilitatorKeys,
    accounts,
    kill: own.kill,
    stop: own.stop,
  });
  const known =
    existing !== null || fromSave !== null
      ? await remembered(rememberIn, rpcUrl, client)
      : { token: null, anchor: null, batch: null, fundingTransactions: [] };
  /** The contracts beside the token: the ones this chain has already, the others deployed now. */
  const helpersOf = async (token, fundingTransactions = known.fundingTransactions) => {
    const anchor = known.anchor ?? (await deployAuditAnchor(wallet, client));
    log(`audit checkpoints are anchored at ${anchor}${known.anchor ? " (already there)" : ""}`);
    const batch = known.batch ?? (await deployCompiled(wallet, client, compileSettlementBatch()));
    log(`x402 settlements are batched through ${batch}${known.batch ? " (already there)" : ""}`);
    if (rememberIn && (!known.anchor || !known.batch || fundingTransactions !== known.fundingTransactions)) {
      const genesis = await client.getBlock({ blockNumber: 0n });
      writeFileSync(
        rememberIn,
        JSON.stringify({ rpcUrl, genesis: genesis.hash, token, anchor, batch, fundingTransactions }),
      );
    }
    return { anchor, batch, fundingTransactions };
  };
  if (known.token) {
    log(`using the test stablecoin this chain already has at ${known.token} (its balances as they are)`);
    return started(known.token, await helpersOf(known.token));
  }
  await mineHistory(rpcUrl, history, log, { fresh: existing === null && fromSave === null });
  const deployHash = await wallet.deployContract({ abi, bytecode });
  const { contractAddress } = await client.waitForTransactionReceipt({ hash: deployHash, pollingInterval: 50 });
  log(`test stablecoin (USD Coin, version 2, 6 decimals) at ${contractAddress}`);
  for (const { address } of accounts.slice(1)) {
    const hash = await wallet.writeContract({
      address: contractAddress,
      abi,
      functionName: "mint",
      args: [address, MINT_PER_ACCOUNT],
    });
    await client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  }
  log("minted 1,000 tokens to accounts 1-9");
  // The service's settlement address: an account of the same mnemonic that no payer uses. It starts
  // with a float, as a funded treasury would: money the ledger owes merchants can leave from it.
  const floatHash = await wallet.writeContract({
    address: contractAddress,
    abi,
    functionName: "mint",
    args: [payTo, SETTLEMENT_FLOAT],
  });
  await client.waitForTransactionReceipt({ hash: floatHash, pollingInterval: 50 });
  log(`minted 100,000 tokens to the settlement address ${payTo}`);
  // The built-in facilitator's gas keys beyond account 0 get gas of their own (anvil funds only accounts 0-9).
  for (const key of facilitatorKeys.slice(1)) await giveGas(client, privateKeyToAccount(key).address);
  log(
    `the facilitator pays gas from ${facilitatorKeys.length} keys (accounts ${GAS_LANES.join(", ")}), one settlement lane each`,
  );
  return started(contractAddress, await helpersOf(contractAddress, [floatHash]));
}

/** The Worker settings that point x402 at a local chain. */
export function x402Vars(chain) {
  return {
    X402_NETWORK: "base-sepolia",
    X402_CHAIN_ID: String(chain.chainId),
    X402_ASSET: chain.token,
    X402_ASSET_NAME: "USD Coin",
    X402_ASSET_VERSION: "2",
    X402_PAY_TO: chain.payTo,
    SETTLEMENT_PRIVATE_KEY: chain.settlementKey,
    RPC_URL: chain.rpcUrl,
    FACILITATOR_PRIVATE_KEY: chain.facilitatorKeys.join(","),
  };
}

/** The Worker setting that anchors audit checkpoints on a local chain's contract. */
export const auditAnchorVars = (chain) => ({ AUDIT_ANCHOR_ADDRESS: chain.anchor });

/** The Worker setting that settles x402 payments in batches through a local chain's contract. */
export const settlementBatchVars = (chain) => ({ X402_SETTLEMENT_BATCH_ADDRESS: chain.batch });
