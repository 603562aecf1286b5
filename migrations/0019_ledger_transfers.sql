CREATE TABLE `ledger_arrivals` (
	`id` text PRIMARY KEY NOT NULL,
	`from_shard` integer NOT NULL,
	`outcome` text NOT NULL,
	`reason` text,
	`balance_after` integer,
	`created_at` text NOT NULL,
	CONSTRAINT "ledger_arrivals_outcome" CHECK("ledger_arrivals"."outcome" IN ('applied', 'refused'))
);
--> statement-breakpoint
CREATE TABLE `ledger_transfers` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`to_shard` integer NOT NULL,
	`agent_id` text NOT NULL,
	`merchant_id` text NOT NULL,
	`charge_id` text NOT NULL,
	`amount_minor` integer NOT NULL,
	`arrival_plan` text NOT NULL,
	`answer` text,
	`status` text NOT NULL,
	`created_at` text NOT NULL,
	`decided_at` text,
	CONSTRAINT "ledger_transfers_kind" CHECK("ledger_transfers"."kind" IN ('payment')),
	CONSTRAINT "ledger_transfers_status" CHECK("ledger_transfers"."status" IN ('pending', 'completed', 'reversed')),
	CONSTRAINT "ledger_transfers_amount_positive" CHECK("ledger_transfers"."amount_minor" > 0)
);
--> statement-breakpoint
CREATE INDEX `ledger_transfers_pending` ON `ledger_transfers` (`created_at`) WHERE "ledger_transfers"."status" = 'pending';--> statement-breakpoint
CREATE INDEX `ledger_transfers_agent` ON `ledger_transfers` (`agent_id`,`created_at`);