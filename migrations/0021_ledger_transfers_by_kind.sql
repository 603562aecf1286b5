-- Rows of transfers pending across shards exist only where LEDGER_SHARDS > 1 ran (tests, dev): their
-- description and checkout link are not carried over from the serialized plan this drops.
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_ledger_transfers` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`to_shard` integer NOT NULL,
	`agent_id` text NOT NULL,
	`merchant_id` text NOT NULL,
	`charge_id` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`currency` text DEFAULT 'USD' NOT NULL,
	`description` text,
	`checkout_link_id` text,
	`answer` text,
	`status` text NOT NULL,
	`created_at` text NOT NULL,
	`decided_at` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` text NOT NULL,
	CONSTRAINT "ledger_transfers_kind" CHECK("__new_ledger_transfers"."kind" IN ('payment', 'refund')),
	CONSTRAINT "ledger_transfers_status" CHECK("__new_ledger_transfers"."status" IN ('pending', 'completed', 'reversed')),
	CONSTRAINT "ledger_transfers_amount_positive" CHECK("__new_ledger_transfers"."amount_minor" > 0)
);
--> statement-breakpoint
INSERT INTO `__new_ledger_transfers`("id", "kind", "to_shard", "agent_id", "merchant_id", "charge_id", "amount_minor", "answer", "status", "created_at", "decided_at", "next_attempt_at") SELECT "id", "kind", "to_shard", "agent_id", "merchant_id", "charge_id", "amount_minor", "answer", "status", "created_at", "decided_at", "created_at" FROM `ledger_transfers`;--> statement-breakpoint
DROP TABLE `ledger_transfers`;--> statement-breakpoint
ALTER TABLE `__new_ledger_transfers` RENAME TO `ledger_transfers`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `ledger_transfers_pending` ON `ledger_transfers` (`next_attempt_at`) WHERE "ledger_transfers"."status" = 'pending';--> statement-breakpoint
CREATE INDEX `ledger_transfers_agent` ON `ledger_transfers` (`agent_id`,`created_at`);