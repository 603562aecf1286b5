CREATE TABLE `merchants` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`category` text,
	`api_key_hash` text NOT NULL,
	`balance_minor` integer DEFAULT 0 NOT NULL,
	`currency` text DEFAULT 'USD' NOT NULL,
	`payout_address` text,
	`created_at` text NOT NULL,
	CONSTRAINT "merchant_balance_non_negative" CHECK("merchants"."balance_minor" >= 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `merchants_api_key_hash_unique` ON `merchants` (`api_key_hash`);--> statement-breakpoint
CREATE TABLE `agents` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`api_key_hash` text NOT NULL,
	`balance_minor` integer DEFAULT 0 NOT NULL,
	`currency` text DEFAULT 'USD' NOT NULL,
	`policy` text DEFAULT '{}' NOT NULL,
	`created_at` text NOT NULL,
	CONSTRAINT "agent_balance_non_negative" CHECK("agents"."balance_minor" >= 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `agents_api_key_hash_unique` ON `agents` (`api_key_hash`);--> statement-breakpoint
CREATE TABLE `charges` (
	`id` text PRIMARY KEY NOT NULL,
	`merchant_id` text NOT NULL,
	`agent_id` text,
	`amount_minor` integer NOT NULL,
	`currency` text DEFAULT 'USD' NOT NULL,
	`description` text,
	`external_id` text,
	`status` text NOT NULL,
	`method` text,
	`reference` text,
	`created_at` text NOT NULL,
	`paid_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `charges_reference_unique` ON `charges` (`reference`);--> statement-breakpoint
CREATE INDEX `charges_merchant_created` ON `charges` (`merchant_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `charges_agent_paid` ON `charges` (`agent_id`,`paid_at`);--> statement-breakpoint
CREATE TABLE `approvals` (
	`id` text PRIMARY KEY NOT NULL,
	`charge_id` text NOT NULL,
	`agent_id` text NOT NULL,
	`merchant_id` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`reason` text NOT NULL,
	`status` text NOT NULL,
	`expires_at` text NOT NULL,
	`created_at` text NOT NULL,
	`decided_at` text,
	`decided_by` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `approvals_one_pending_per_charge` ON `approvals` (`charge_id`) WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX `approvals_status_created` ON `approvals` (`status`,`created_at`);--> statement-breakpoint
CREATE TABLE `audit_events` (
	`seq` integer PRIMARY KEY NOT NULL,
	`type` text NOT NULL,
	`reference` text,
	`charge_id` text,
	`agent_id` text,
	`merchant_id` text,
	`amount_minor` integer NOT NULL,
	`currency` text NOT NULL,
	`data` text NOT NULL,
	`created_at` text NOT NULL,
	`prev_hash` text NOT NULL,
	`hash` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_events_created` ON `audit_events` (`created_at`);--> statement-breakpoint
CREATE TABLE `ledger_entries` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`transfer_id` text NOT NULL,
	`account` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `ledger_entries_account` ON `ledger_entries` (`account`);--> statement-breakpoint
CREATE INDEX `ledger_entries_transfer` ON `ledger_entries` (`transfer_id`);--> statement-breakpoint
CREATE TABLE `outbox_events` (
	`id` text PRIMARY KEY NOT NULL,
	`type` text NOT NULL,
	`merchant_id` text,
	`data` text NOT NULL,
	`created_at` text NOT NULL,
	`dispatched_at` text
);
--> statement-breakpoint
CREATE INDEX `outbox_events_undispatched` ON `outbox_events` (`dispatched_at`,`created_at`);--> statement-breakpoint
CREATE TABLE `console_users` (
	`email` text PRIMARY KEY NOT NULL,
	`added_by` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `kyt_blocklist` (
	`address` text PRIMARY KEY NOT NULL,
	`reason` text NOT NULL,
	`added_by` text NOT NULL,
	`created_at` text NOT NULL
);
