CREATE TABLE `audit_checkpoints` (
	`seq` integer PRIMARY KEY NOT NULL,
	`hash` text NOT NULL,
	`from_seq` integer NOT NULL,
	`rows_root` text NOT NULL,
	`signed_at` text NOT NULL,
	`kid` text NOT NULL,
	`jws` text NOT NULL,
	`anchor_status` text NOT NULL,
	`anchor_from` text,
	`tx_hash` text,
	`block_number` integer,
	`broadcast_at` text,
	`anchored_at` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_checkpoints_anchor` ON `audit_checkpoints` (`anchor_status`,`updated_at`);--> statement-breakpoint
CREATE TABLE `treasury_checks` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` text NOT NULL,
	`as_of_block` integer NOT NULL,
	`status` text NOT NULL,
	`settlement_base_units` text NOT NULL,
	`deposit_addresses_base_units` text NOT NULL,
	`total_base_units` text NOT NULL,
	`expected_base_units` text NOT NULL,
	`difference_base_units` text NOT NULL,
	`on_chain_in_minor` integer NOT NULL,
	`on_chain_out_minor` integer NOT NULL,
	`pending_out_minor` integer NOT NULL,
	`addresses_read` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `treasury_checks_at` ON `treasury_checks` (`at`);--> statement-breakpoint
CREATE INDEX `audit_events_charge` ON `audit_events` (`charge_id`);--> statement-breakpoint
CREATE INDEX `audit_events_reference` ON `audit_events` (`reference`);