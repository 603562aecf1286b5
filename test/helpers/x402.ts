import {
  createPublicClient,
  createWalletClient,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  parseAbi,
  parseAbiItem,
  recoverTypedDataAddress,
  toHex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect, inject } from "vitest";
import { transferCallData } from "../../src/x402/transfer";
import type { Refusal, RelayedSend } from "../setup/chain.global";
import { api } from "./api";

export const chain = () => inject("chain");

/**
 * EIP-3009's TransferWithAuthorization, spelled here from the standard rather than taken from the
 * service, so a test that signs or recovers with it checks the service's own typed data.
 */
const EIP3009_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

/** Who signed an authorization (as an x402 payload states it, decimal strings) under the token's `domain`. */
export const signerOfAuthorization = (
  signature: Hex,
  a: Record<string, string>,
  domain: { name: string; version: string; chainId: number; verifyingContract: Hex },
) =>
  recoverTypedDataAddress({
    domain,
    types: EIP3009_TYPES,
    primaryType: "TransferWithAuthorization",
    message: {
      from: a.from as Hex,
      to: a.to as Hex,
      value: BigInt(a.value!),
      validAfter: BigInt(a.validAfter!),
      validBefore: BigInt(a.validBefore!),
      nonce: a.nonce as Hex,
    },
    signature,
  });

/** Makes the RPC relay in front of the chain refuse what `refusal` names (test/setup/chain.global.ts). */
export async function refuseAtRelay(refusal: Refusal) {
  const res = await fetch(`${chain().relayUrl}/refuse`, { method: "POST", body: JSON.stringify(refusal) });
  expect(res.status).toBe(204);
}

/**
 * The next send whose transaction contains `containing` reaches the node, and its answer is lost on
 * the way back as a "nonce too low" error (optionally with an HTTP status, as some providers answer).
 */
export const loseAnswerToSend = (containing: string, rpcErrorStatus?: number) =>
  refuseAtRelay({
    containing,
    method: "eth_sendRawTransaction",
    times: 1,
    forwardFirst: true,
    message: "nonce too low: next nonce 999, tx nonce 1",
    ...(rpcErrorStatus ? { rpcErrorStatus } : {}),
  });

/** What the Worker has sent through the relay so far. */
export const relayedSends = async () => (await (await fetch(`${chain().relayUrl}/sends`)).json()) as RelayedSend[];

export const TOKEN_ABI = [
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "a", type: "address" }],
    outputs: [{ type: "uint256" }],
  },
  {
    type: "function",
    name: "authorizationState",
    stateMutability: "view",
    inputs: [
      { name: "a", type: "address" },
      { name: "n", type: "bytes32" },
    ],
    outputs: [{ type: "bool" }],
  },
] as const;

export const publicClient = () => createPublicClient({ transport: http(chain().rpcUrl) });

export const tokenBalance = (address: Hex) =>
  publicClient().readContract({ address: chain().token, abi: TOKEN_ABI, functionName: "balanceOf", args: [address] });

export const randomNonce = (): Hex =>
  `0x${Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, "0")).join("")}`;

export interface AuthorizationOverrides {
  to?: Hex;
  value?: bigint;
  validAfter?: bigint;
  validBefore?: bigint;
  nonce?: Hex;
  verifyingContract?: Hex;
  signerKey?: Hex;
  domainName?: string;
}

/**
 * Signs an EIP-3009 TransferWithAuthorization as an x402 client does, for a
 * payer given as an account index of the local chain or as any private key.
 */
export async function signAuthorization(payer: number | Hex, value: bigint, overrides: AuthorizationOverrides = {}) {
  const c = chain();
  const from =
    typeof payer === "number" ? c.accounts[payer]! : { address: privateKeyToAccount(payer).address, privateKey: payer };
  const signer = privateKeyToAccount(overrides.signerKey ?? from.privateKey);
  const now = BigInt(Math.floor(Date.now() / 1000));
  const authorization = {
    from: from.address,
    to: overrides.to ?? c.payTo,
    value: overrides.value ?? value,
    validAfter: overrides.validAfter ?? now - 600n,
    validBefore: overrides.validBefore ?? now + 300n,
    nonce: overrides.nonce ?? randomNonce(),
  };
  const signature = await signer.signTypedData({
    domain: {
      name: overrides.domainName ?? "USD Coin",
      version: "2",
      chainId: c.chainId,
      verifyingContract: overrides.verifyingContract ?? c.token,
    },
    types: EIP3009_TYPES,
    primaryType: "TransferWithAuthorization",
    message: authorization,
  });
  return {
    signature,
    authorization: {
      from: authorization.from,
      to: authorization.to,
      value: authorization.value.toString(),
      validAfter: authorization.validAfter.toString(),
      validBefore: authorization.validBefore.toString(),
      nonce: authorization.nonce,
    },
  };
}

const toBase64 = (text: string) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));

/** A v1 X-PAYMENT header in standard base64 (what official clients send); `urlSafe` gives the spec's base64url. */
export async function xPaymentHeader(
  payer: number | Hex,
  value: bigint,
  overrides: AuthorizationOverrides & { network?: string; urlSafe?: boolean } = {},
) {
  const payload = await signAuthorization(payer, value, overrides);
  const json = JSON.stringify({
    x402Version: 1,
    scheme: "exact",
    network: overrides.network ?? "base-sepolia",
    payload,
  });
  const b64 = toBase64(json);
  return { header: overrides.urlSafe ? b64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "") : b64, payload };
}

/**
 * The address an authorization for the x402 resource at `path` must pay: the `payTo` of its 402
 * terms, the receiving address of that one charge or checkout link.
 */
export async function payToOf(path: string): Promise<Hex> {
  const res = await api("GET", path);
  expect(res.status, `terms of ${path}`).toBe(402);
  return res.body.accepts[0].payTo as Hex;
}

/** A v1 X-PAYMENT header for the x402 resource at `path`, signed to its receiving address. */
export async function xPaymentFor(
  path: string,
  payer: number | Hex,
  value: bigint,
  overrides: Parameters<typeof xPaymentHeader>[2] = {},
) {
  return xPaymentHeader(payer, value, { to: await payToOf(path), ...overrides });
}

/** TestUSDC storage: slot 0 totalSupply, slot 1 balanceOf (owner is immutable). */
const BALANCE_SLOT = 1n;

export interface Payer {
  key: Hex;
  address: Hex;
}

/** The test token's owner (account 0 of the local chain) mints `value` to `to`; answers the mined transaction. */
export async function mintTokens(to: Hex, value: bigint): Promise<Hex> {
  const owner = createWalletClient({
    account: privateKeyToAccount(chain().accounts[0]!.privateKey as Hex),
    transport: http(chain().rpcUrl),
  });
  const hash = await owner.writeContract({
    chain: null,
    address: chain().token,
    abi: parseAbi(["function mint(address to, uint256 value)"]),
    functionName: "mint",
    args: [to, value],
  });
  expect((await publicClient().waitForTransactionReceipt({ hash, pollingInterval: 100 })).status).toBe("success");
  return hash;
}

/**
 * The node's answer to the next send whose transaction contains `containing` is held at the relay for
 * `ms` (a slow node): a lane's batch is made by holding a first, lone send while the others gather.
 */
export const holdNextSend = (containing: string, ms: number) =>
  refuseAtRelay({ containing, method: "eth_sendRawTransaction", times: 1, holdOnly: true, afterMs: ms });

/**
 * A fresh payer key whose token balance is set directly on the local chain (anvil_setStorageAt on
 * the token's balance mapping), so no other test file ever moves its tokens and every delta is
 * exact even with files running in parallel.
 */
export async function freshPayer(tokens: bigint): Promise<Payer> {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  const slot = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [address, BALANCE_SLOT]));
  await publicClient().request({
    method: "anvil_setStorageAt" as never,
    params: [chain().token, slot, toHex(tokens, { size: 32 })] as never,
  });
  expect(await tokenBalance(address)).toBe(tokens);
  return { key, address };
}

/** A gas account of its own (fresh key, ETH set on the chain), so no other test shares its nonces. */
export async function gasWallet() {
  const account = privateKeyToAccount(generatePrivateKey());
  await publicClient().request({
    method: "anvil_setBalance" as never,
    params: [account.address, toHex(10n ** 19n)] as never,
  });
  return createWalletClient({ account, transport: http(chain().rpcUrl) });
}

export type SignedAuthorization = Awaited<ReturnType<typeof xPaymentHeader>>["payload"];

/** Submits the payer's authorization to the token as anyone could (a watcher of the mempool, the payer). */
export async function submitAuthorization(signed: SignedAuthorization, gas = 200_000n) {
  const wallet = await gasWallet();
  const data = transferCallData(signed as Parameters<typeof transferCallData>[0]);
  if (!data) throw new Error("the authorization's signature is not a valid (r, s, v)");
  const hash = await wallet.sendTransaction({ chain: null, to: chain().token, data, gas });
  return publicClient().waitForTransactionReceipt({ hash });
}

const TRANSFER = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");

/** Transfers from `payers` (fresh keys that only ever pay these tests' charges) since `fromBlock`, read from the chain's logs. */
export async function transfersFrom(payers: Hex[], fromBlock: bigint) {
  const logs = await publicClient().getLogs({
    address: chain().token,
    event: TRANSFER,
    args: { from: payers },
    fromBlock,
    toBlock: "latest",
  });
  return logs.map((l) => ({ from: l.args.from!.toLowerCase(), value: l.args.value!, transaction: l.transactionHash }));
}
