-- The life of an agent's outbound x402 payment after it is authorized: the chain's head when it was
-- signed (where a search for the transaction that used it starts), and the reconciliation's pass.
ALTER TABLE `agent_x402_payments` ADD `recorded_block` integer;--> statement-breakpoint
CREATE INDEX `agent_x402_payments_due` ON `agent_x402_payments` (`status`,`updated_at`);
