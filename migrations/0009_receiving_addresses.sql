CREATE TABLE `receiving_addresses` (
	`idx` integer PRIMARY KEY NOT NULL,
	`owner_id` text NOT NULL,
	`owner_kind` text NOT NULL,
	`merchant_id` text NOT NULL,
	`address` text,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `receiving_addresses_owner` ON `receiving_addresses` (`owner_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `receiving_addresses_address` ON `receiving_addresses` (`address`);--> statement-breakpoint
CREATE INDEX `receiving_addresses_merchant` ON `receiving_addresses` (`merchant_id`);--> statement-breakpoint
ALTER TABLE `x402_payments` ADD `pay_to` text;--> statement-breakpoint
CREATE INDEX `x402_payments_pay_to` ON `x402_payments` (`pay_to`);