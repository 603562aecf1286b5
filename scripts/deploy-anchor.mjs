// Deploys the audit checkpoints' anchoring contract (contracts/AuditAnchor.sol) once, on the chain
// the service takes payments on, and prints its address for AUDIT_ANCHOR_ADDRESS.
//   RPC_URL=https://... DEPLOYER_PRIVATE_KEY=0x... node scripts/deploy-anchor.mjs
// The deployer pays the gas and gains nothing else: the contract has no owner and no state, and
// anyone may call it (a verifier counts only the anchors the service's gas addresses sent).
import { createPublicClient, createWalletClient, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { deployAuditAnchor } from "./lib/chain.mjs";

const rpcUrl = process.env.RPC_URL;
const key = process.env.DEPLOYER_PRIVATE_KEY;
if (!rpcUrl || !key || !/^0x[0-9a-fA-F]{64}$/.test(key)) {
  console.error("usage: RPC_URL=<url> DEPLOYER_PRIVATE_KEY=<0x... 32-byte hex> node scripts/deploy-anchor.mjs");
  process.exit(2);
}
const transport = http(rpcUrl);
const client = createPublicClient({ transport });
const chain = { id: await client.getChainId() };
const wallet = createWalletClient({ account: privateKeyToAccount(key), chain, transport });
let address;
try {
  address = await deployAuditAnchor(wallet, client);
} catch (error) {
  console.error(`deploy failed: ${error.shortMessage ?? error.message}`);
  process.exit(1);
}
console.error(`AuditAnchor deployed on chain ${chain.id}; set AUDIT_ANCHOR_ADDRESS to:`);
console.log(address);
