-- Charges settled in one batched x402 transaction (contracts/SettlementBatch.sol) share its hash as their reference.
DROP INDEX `charges_reference_unique`;