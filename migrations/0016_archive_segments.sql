-- History archived to R2 (src/archive/): the segments written, the carried-forward sums of archived
-- ledger entries per account, and where archived receipt rows are (by charge or reference).
CREATE TABLE `archive_segments` (
	`first_seq` integer PRIMARY KEY NOT NULL,
	`last_seq` integer NOT NULL,
	`prev_hash` text NOT NULL,
	`last_hash` text NOT NULL,
	`after_entry_id` integer NOT NULL,
	`last_entry_id` integer NOT NULL,
	`rows` integer NOT NULL,
	`entries` integer NOT NULL,
	`min_created_at` text NOT NULL,
	`max_created_at` text NOT NULL,
	`object_key` text NOT NULL,
	`object_sha256` text,
	`status` text NOT NULL,
	`archived_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `archive_segments_last_seq` ON `archive_segments` (`last_seq`);--> statement-breakpoint
CREATE INDEX `archive_segments_created` ON `archive_segments` (`min_created_at`,`max_created_at`);--> statement-breakpoint
CREATE TABLE `archived_audit_refs` (
	`seq` integer PRIMARY KEY NOT NULL,
	`type` text NOT NULL,
	`charge_id` text,
	`reference` text
);
--> statement-breakpoint
CREATE INDEX `archived_audit_refs_charge` ON `archived_audit_refs` (`charge_id`);--> statement-breakpoint
CREATE INDEX `archived_audit_refs_reference` ON `archived_audit_refs` (`reference`);--> statement-breakpoint
CREATE TABLE `archived_balances` (
	`account` text PRIMARY KEY NOT NULL,
	`carried_minor` integer NOT NULL,
	`entries` integer NOT NULL
);
