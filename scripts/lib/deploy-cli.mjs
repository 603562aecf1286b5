// Deploys one of contracts/ on the chain the service takes payments on, from a key given in the
// environment, and prints its address (stdout) for the setting that names it.
import { createPublicClient, createWalletClient, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { deployCompiled } from "./chain.mjs";
import { compileContract } from "./contracts.mjs";

/** Runs the deployment of `contract`, as `script` is invoked, and names `setting` in its report. */
export async function deployFromCli({ contract, script, setting }) {
  const rpcUrl = process.env.RPC_URL;
  const key = process.env.DEPLOYER_PRIVATE_KEY;
  if (!rpcUrl || !key || !/^0x[0-9a-fA-F]{64}$/.test(key)) {
    console.error(`usage: RPC_URL=<url> DEPLOYER_PRIVATE_KEY=<0x... 32-byte hex> node ${script}`);
    process.exit(2);
  }
  const transport = http(rpcUrl);
  const client = createPublicClient({ transport });
  const chain = { id: await client.getChainId() };
  const wallet = createWalletClient({ account: privateKeyToAccount(key), chain, transport });
  let address;
  try {
    address = await deployCompiled(wallet, client, compileContract(contract));
  } catch (error) {
    console.error(`deploy failed: ${error.shortMessage ?? error.message}`);
    process.exit(1);
  }
  console.error(`${contract} deployed on chain ${chain.id}; set ${setting} to:`);
  console.log(address);
}
