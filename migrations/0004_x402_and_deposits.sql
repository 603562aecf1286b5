CREATE TABLE `chain_cursors` (
	`name` text PRIMARY KEY NOT NULL,
	`block_number` integer NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `deposits` (
	`id` text PRIMARY KEY NOT NULL,
	`network` text NOT NULL,
	`tx_hash` text NOT NULL,
	`log_index` integer NOT NULL,
	`block_number` integer NOT NULL,
	`agent_id` text NOT NULL,
	`address` text NOT NULL,
	`sender` text NOT NULL,
	`value` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`status` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deposits_tx_log` ON `deposits` (`network`,`tx_hash`,`log_index`);--> statement-breakpoint
CREATE TABLE `x402_payments` (
	`id` text PRIMARY KEY NOT NULL,
	`network` text NOT NULL,
	`asset` text NOT NULL,
	`payer` text NOT NULL,
	`nonce` text NOT NULL,
	`charge_id` text NOT NULL,
	`value` text NOT NULL,
	`valid_before` integer NOT NULL,
	`payload` text NOT NULL,
	`status` text NOT NULL,
	`tx_hash` text,
	`error` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `x402_payments_authorization` ON `x402_payments` (`network`,`asset`,`payer`,`nonce`);--> statement-breakpoint
CREATE INDEX `x402_payments_status` ON `x402_payments` (`status`,`updated_at`);--> statement-breakpoint
CREATE INDEX `x402_payments_charge` ON `x402_payments` (`charge_id`);--> statement-breakpoint
ALTER TABLE `agents` ADD `deposit_index` integer;--> statement-breakpoint
ALTER TABLE `agents` ADD `deposit_address` text;--> statement-breakpoint
CREATE UNIQUE INDEX `agents_deposit_index_unique` ON `agents` (`deposit_index`);--> statement-breakpoint
CREATE UNIQUE INDEX `agents_deposit_address_unique` ON `agents` (`deposit_address`);--> statement-breakpoint
ALTER TABLE `charges` ADD `x402_claim` text;