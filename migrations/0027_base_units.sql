-- Money exact to the token's base unit (1 cent = 10,000): every balance, charge amount, ledger
-- entry and audit row gains its amount in base units, which is what the ledger moves from now on.
-- The cents columns stay, derived: the whole cents, rounded down (toward zero for a signed entry),
-- and the triggers below refuse any write that lets the two disagree. Every row before this
-- migration is a whole number of cents, so its base units are its cents times 10,000.
ALTER TABLE `agents` ADD `balance_base_units` integer DEFAULT 0 NOT NULL CHECK (`balance_base_units` >= 0);--> statement-breakpoint
ALTER TABLE `charges` ADD `amount_base_units` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `audit_events` ADD `amount_base_units` text;--> statement-breakpoint
ALTER TABLE `ledger_entries` ADD `amount_base_units` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `merchants` ADD `balance_base_units` integer DEFAULT 0 NOT NULL CHECK (`balance_base_units` >= 0);--> statement-breakpoint
UPDATE `agents` SET `balance_base_units` = `balance_minor` * 10000;--> statement-breakpoint
UPDATE `merchants` SET `balance_base_units` = `balance_minor` * 10000;--> statement-breakpoint
UPDATE `charges` SET `amount_base_units` = `amount_minor` * 10000;--> statement-breakpoint
UPDATE `ledger_entries` SET `amount_base_units` = `amount_minor` * 10000;--> statement-breakpoint
-- Audit rows keep what their hash covered: a row written before this migration has no base units
-- (null), and its exact amount is its cents.
CREATE TRIGGER `agents_balance_cents_derived` BEFORE UPDATE OF `balance_minor`, `balance_base_units` ON `agents`
WHEN NEW.`balance_minor` IS NOT NEW.`balance_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'balance_cents_not_derived'); END;--> statement-breakpoint
CREATE TRIGGER `merchants_balance_cents_derived` BEFORE UPDATE OF `balance_minor`, `balance_base_units` ON `merchants`
WHEN NEW.`balance_minor` IS NOT NEW.`balance_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'balance_cents_not_derived'); END;--> statement-breakpoint
CREATE TRIGGER `charges_amount_cents_derived` BEFORE INSERT ON `charges`
WHEN NEW.`amount_minor` IS NOT NEW.`amount_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'amount_cents_not_derived'); END;--> statement-breakpoint
CREATE TRIGGER `ledger_entries_cents_derived` BEFORE INSERT ON `ledger_entries`
WHEN NEW.`amount_minor` IS NOT NEW.`amount_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'amount_cents_not_derived'); END;
--> statement-breakpoint
ALTER TABLE `archived_balances` ADD `carried_base_units` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE `archived_balances` SET `carried_base_units` = `carried_minor` * 10000;
