import {
  createWalletClient,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  parseAbi,
  parseEventLogs,
  toHex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import { chain, publicClient, tokenBalance } from "./x402";

/** The test token's plain ERC-20 side: a transfer and its event. */
export const TOKEN = parseAbi([
  "function transfer(address to, uint256 value) returns (bool)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
]);

/** The storage slot of the test token's balances mapping. */
const BALANCE_SLOT = 1n;

/** Sets `address`'s token balance directly on the local chain (anvil_setStorageAt). */
export async function setTokens(address: Hex, tokens: bigint) {
  const slot = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [address, BALANCE_SLOT]));
  await publicClient().request({
    method: "anvil_setStorageAt" as never,
    params: [chain().token, slot, toHex(tokens, { size: 32 })] as never,
  });
}

/**
 * A fresh key holding `tokens` and gas, to send plain token transfers from: no other test file
 * shares its nonces or its balance.
 */
export async function freshSender(tokens: bigint) {
  const account = privateKeyToAccount(generatePrivateKey());
  await setTokens(account.address, tokens);
  await publicClient().request({
    method: "anvil_setBalance" as never,
    params: [account.address, toHex(10n ** 18n)] as never,
  });
  expect(await tokenBalance(account.address)).toBe(tokens);
  return { account, wallet: createWalletClient({ account, transport: http(chain().rpcUrl) }) };
}

export type Sender = Awaited<ReturnType<typeof freshSender>>;

/** Sends `value` token units to `to`; returns the transaction and where its Transfer landed. */
export async function sendTokens(sender: Sender, to: Hex, value: bigint) {
  const hash = await sender.wallet.writeContract({
    chain: null,
    address: chain().token,
    abi: TOKEN,
    functionName: "transfer",
    args: [to, value],
  });
  const receipt = await publicClient().waitForTransactionReceipt({ hash, pollingInterval: 100 });
  expect(receipt.status).toBe("success");
  const [log] = parseEventLogs({ abi: TOKEN, eventName: "Transfer", logs: receipt.logs });
  return { hash, blockNumber: receipt.blockNumber, logIndex: log!.logIndex };
}
