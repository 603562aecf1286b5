-- An agent's payments of x402 paywalls anywhere: each row is an EIP-3009 authorization the service
-- signed from its settlement address, written in the batch that debits the agent's wallet (its home).
CREATE TABLE `agent_x402_payments` (
	`id` text PRIMARY KEY NOT NULL,
	`agent_id` text NOT NULL,
	`resource` text NOT NULL,
	`pay_to` text NOT NULL,
	`network` text NOT NULL,
	`asset` text NOT NULL,
	`amount_base_units` integer NOT NULL,
	`nonce` text NOT NULL,
	`valid_before` integer NOT NULL,
	`header_name` text NOT NULL,
	`header_value` text NOT NULL,
	`status` text NOT NULL,
	`tx_hash` text,
	`created_at` text NOT NULL,
	`settled_at` text,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `agent_x402_payments_nonce` ON `agent_x402_payments` (`nonce`);--> statement-breakpoint
CREATE INDEX `agent_x402_payments_agent_created` ON `agent_x402_payments` (`agent_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `agent_x402_payments_status` ON `agent_x402_payments` (`status`,`valid_before`);