import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";

/** 10,000 ETH in wei, as hex: gas for every transaction a test file's Worker sends. */
const GAS = `0x${(10_000n * 10n ** 18n).toString(16)}`;

/**
 * Gas keys of one test file's Worker, new for each file and funded on the project's local chain
 * (anvil_setBalance). Test files run at once: each Worker has its own keys, so no two files' settlers
 * ever race for one key's nonces, and a file's assertions on its keys' sends see only its own.
 * `count` keys are that many settlement lanes (FACILITATOR_PRIVATE_KEY takes them comma-separated).
 */
export async function freshGasKeys(rpcUrl: string, count: number): Promise<string> {
  const keys = Array.from({ length: count }, () => generatePrivateKey());
  for (const key of keys) {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "anvil_setBalance",
        params: [privateKeyToAddress(key), GAS],
      }),
    });
    const answer = (await res.json()) as { error?: { message: string } };
    if (answer.error) throw new Error(`anvil_setBalance: ${answer.error.message}`);
  }
  return keys.join(",");
}
