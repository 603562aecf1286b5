CREATE TABLE `treasury_fundings` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`tx_hash` text NOT NULL,
	`network` text NOT NULL,
	`asset` text NOT NULL,
	`amount_base_units` text NOT NULL,
	`block_number` integer NOT NULL,
	`booked_by` text NOT NULL,
	`booked_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `treasury_fundings_tx` ON `treasury_fundings` (`tx_hash`);--> statement-breakpoint
ALTER TABLE `treasury_checks` ADD `float_base_units` text DEFAULT '0' NOT NULL;