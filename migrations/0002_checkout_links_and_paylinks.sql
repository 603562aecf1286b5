CREATE TABLE `checkout_links` (
	`id` text PRIMARY KEY NOT NULL,
	`token` text NOT NULL,
	`merchant_id` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`currency` text DEFAULT 'USD' NOT NULL,
	`description` text NOT NULL,
	`external_id` text,
	`visits` integer DEFAULT 0 NOT NULL,
	`payments_count` integer DEFAULT 0 NOT NULL,
	`total_paid_minor` integer DEFAULT 0 NOT NULL,
	`active` integer DEFAULT true NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `checkout_links_token_unique` ON `checkout_links` (`token`);--> statement-breakpoint
CREATE INDEX `checkout_links_merchant_created` ON `checkout_links` (`merchant_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `paylink_grants` (
	`id` text PRIMARY KEY NOT NULL,
	`paylink_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`merchant_id` text NOT NULL,
	`spent_minor` integer DEFAULT 0 NOT NULL,
	`uses` integer DEFAULT 0 NOT NULL,
	`budget_minor` integer NOT NULL,
	`created_at` text NOT NULL,
	CONSTRAINT "paylink_grant_within_budget" CHECK("paylink_grants"."spent_minor" >= 0 AND "paylink_grants"."spent_minor" <= "paylink_grants"."budget_minor")
);
--> statement-breakpoint
CREATE UNIQUE INDEX `paylink_grants_paylink_agent` ON `paylink_grants` (`paylink_id`,`agent_id`);--> statement-breakpoint
CREATE TABLE `paylinks` (
	`id` text PRIMARY KEY NOT NULL,
	`code` text NOT NULL,
	`merchant_id` text NOT NULL,
	`label` text,
	`budget_minor` integer NOT NULL,
	`per_charge_minor` integer,
	`max_uses` integer,
	`expires_at` text,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `paylinks_code_unique` ON `paylinks` (`code`);--> statement-breakpoint
ALTER TABLE `charges` ADD `checkout_link_id` text;--> statement-breakpoint
ALTER TABLE `charges` ADD `paylink_grant_id` text;--> statement-breakpoint
CREATE INDEX `charges_checkout_link` ON `charges` (`checkout_link_id`);