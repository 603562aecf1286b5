-- An approval holds either a charge or an agent's outbound x402 payment: `charge_id` and
-- `merchant_id` become nullable (a table rebuild in SQLite), and an outbound approval names the one
-- request it lets through (`resource`, `pay_to`, `network`, `asset`, the exact amount) and, once
-- used, the payment that used it (`x402_payment_id`). Dropping the old table drops its trigger: it
-- is created again as 0030 wrote it.
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_approvals` (
	`id` text PRIMARY KEY NOT NULL,
	`charge_id` text,
	`agent_id` text NOT NULL,
	`merchant_id` text,
	`amount_minor` integer NOT NULL,
	`amount_base_units` integer DEFAULT 0 NOT NULL,
	`resource` text,
	`pay_to` text,
	`network` text,
	`asset` text,
	`x402_payment_id` text,
	`reason` text NOT NULL,
	`status` text NOT NULL,
	`expires_at` text NOT NULL,
	`created_at` text NOT NULL,
	`decided_at` text,
	`decided_by` text
);
--> statement-breakpoint
INSERT INTO `__new_approvals`("id", "charge_id", "agent_id", "merchant_id", "amount_minor", "amount_base_units", "reason", "status", "expires_at", "created_at", "decided_at", "decided_by") SELECT "id", "charge_id", "agent_id", "merchant_id", "amount_minor", "amount_base_units", "reason", "status", "expires_at", "created_at", "decided_at", "decided_by" FROM `approvals`;--> statement-breakpoint
DROP TABLE `approvals`;--> statement-breakpoint
ALTER TABLE `__new_approvals` RENAME TO `approvals`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `approvals_one_pending_per_charge_agent` ON `approvals` (`charge_id`,`agent_id`) WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX `approvals_status_created` ON `approvals` (`status`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `approvals_one_pending_per_x402_request` ON `approvals` (`agent_id`,`resource`,`pay_to`,`amount_base_units`,`network`,`asset`) WHERE status = 'pending' AND charge_id IS NULL;--> statement-breakpoint
CREATE INDEX `approvals_x402_request` ON `approvals` (`agent_id`,`resource`,`pay_to`,`amount_base_units`) WHERE charge_id IS NULL;;--> statement-breakpoint
CREATE TRIGGER `approvals_amount_cents_derived` BEFORE INSERT ON `approvals`
WHEN NEW.`amount_minor` IS NOT NEW.`amount_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'amount_cents_not_derived'); END;
