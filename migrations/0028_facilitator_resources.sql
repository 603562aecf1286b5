CREATE TABLE `x402_resources` (
	`merchant_id` text NOT NULL,
	`resource` text NOT NULL,
	`type` text NOT NULL,
	`x402_version` integer NOT NULL,
	`accepts` text NOT NULL,
	`description` text,
	`mime_type` text,
	`extensions` text,
	`listed_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`last_paid_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `x402_resources_merchant_resource` ON `x402_resources` (`merchant_id`,`resource`);--> statement-breakpoint
CREATE INDEX `x402_resources_listed` ON `x402_resources` (`listed_at`);--> statement-breakpoint
ALTER TABLE `charges` ADD `resource` text;