CREATE TABLE `outbound_transfers` (
	`id` text PRIMARY KEY NOT NULL,
	`purpose` text NOT NULL,
	`owner_id` text NOT NULL,
	`network` text NOT NULL,
	`asset` text NOT NULL,
	`from_address` text NOT NULL,
	`signer` text NOT NULL,
	`to_address` text NOT NULL,
	`value` text NOT NULL,
	`nonce` text NOT NULL,
	`valid_before` integer NOT NULL,
	`status` text NOT NULL,
	`broadcast_at` text,
	`tx_hash` text,
	`failure_reason` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `outbound_transfers_owner` ON `outbound_transfers` (`purpose`,`owner_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `outbound_transfers_authorization` ON `outbound_transfers` (`from_address`,`nonce`);--> statement-breakpoint
CREATE INDEX `outbound_transfers_status` ON `outbound_transfers` (`status`,`purpose`,`updated_at`);--> statement-breakpoint
CREATE TABLE `payouts` (
	`id` text PRIMARY KEY NOT NULL,
	`merchant_id` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`currency` text NOT NULL,
	`destination` text NOT NULL,
	`status` text NOT NULL,
	`tx_hash` text,
	`failure_reason` text,
	`created_at` text NOT NULL,
	`paid_at` text,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `payouts_merchant_created` ON `payouts` (`merchant_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `payouts_status` ON `payouts` (`status`,`created_at`);--> statement-breakpoint
CREATE TABLE `refunds` (
	`id` text PRIMARY KEY NOT NULL,
	`charge_id` text NOT NULL,
	`merchant_id` text NOT NULL,
	`agent_id` text,
	`amount_minor` integer NOT NULL,
	`currency` text NOT NULL,
	`method` text NOT NULL,
	`destination` text,
	`status` text NOT NULL,
	`tx_hash` text,
	`failure_reason` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `refunds_charge_created` ON `refunds` (`charge_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `refunds_status` ON `refunds` (`status`,`created_at`);--> statement-breakpoint
ALTER TABLE `charges` ADD `refunded_minor` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Refunds never exceed the charge: a batch that would take refunded_minor past
-- amount_minor (or below zero) aborts whole, with the reason a guard gives.
CREATE TRIGGER `charges_refunded_within_amount` BEFORE UPDATE OF `refunded_minor` ON `charges`
WHEN NEW.`refunded_minor` < 0 OR NEW.`refunded_minor` > NEW.`amount_minor`
BEGIN
  SELECT RAISE(ABORT, 'batch_guard:refund_exceeds_remaining');
END;
