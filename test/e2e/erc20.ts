import { createPublicClient, createWalletClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";

/** The test stablecoin's ERC-20 calls the e2e tests make from outside: a balance, and a plain transfer. */
export const ERC20 = [
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "a", type: "address" }],
    outputs: [{ type: "uint256" }],
  },
  {
    type: "function",
    name: "transfer",
    stateMutability: "nonpayable",
    inputs: [
      { name: "to", type: "address" },
      { name: "v", type: "uint256" },
    ],
    outputs: [{ type: "bool" }],
  },
] as const;

/** Sends `units` of the token at `asset` from `privateKey`'s account to `to` on the chain at `rpcUrl`; the transaction, mined. */
export async function sendTokens(rpcUrl: string, privateKey: Hex, asset: Hex, to: Hex, units: bigint): Promise<Hex> {
  const wallet = createWalletClient({ account: privateKeyToAccount(privateKey), transport: http(rpcUrl) });
  const hash = await wallet.writeContract({
    chain: null,
    address: asset,
    abi: ERC20,
    functionName: "transfer",
    args: [to, units],
  });
  await createPublicClient({ transport: http(rpcUrl) }).waitForTransactionReceipt({ hash });
  return hash;
}
