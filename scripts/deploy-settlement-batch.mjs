// Deploys the contract that settles several x402 authorizations in one transaction
// (contracts/SettlementBatch.sol) once, on the chain the service takes payments on, and prints its
// address for X402_SETTLEMENT_BATCH_ADDRESS.
//   RPC_URL=https://... DEPLOYER_PRIVATE_KEY=0x... node scripts/deploy-settlement-batch.mjs
// The deployer pays the gas and gains nothing else: the contract has no owner, no state and no
// funds, and forwards only transferWithAuthorization calls, whose authority is the payer's signature.
import { deployFromCli } from "./lib/deploy-cli.mjs";

await deployFromCli({
  contract: "SettlementBatch",
  script: "scripts/deploy-settlement-batch.mjs",
  setting: "X402_SETTLEMENT_BATCH_ADDRESS",
});
