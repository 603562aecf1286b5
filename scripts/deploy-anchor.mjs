// Deploys the audit checkpoints' anchoring contract (contracts/AuditAnchor.sol) once, on the chain
// the service takes payments on, and prints its address for AUDIT_ANCHOR_ADDRESS.
//   RPC_URL=https://... DEPLOYER_PRIVATE_KEY=0x... node scripts/deploy-anchor.mjs
// The deployer pays the gas and gains nothing else: the contract has no owner and no state, and
// anyone may call it (a verifier counts only the anchors the service's gas addresses sent).
import { deployFromCli } from "./lib/deploy-cli.mjs";

await deployFromCli({ contract: "AuditAnchor", script: "scripts/deploy-anchor.mjs", setting: "AUDIT_ANCHOR_ADDRESS" });
