-- An approval states the exact amount of the payment it holds, in base units (1 cent = 10,000): a
-- held payment may be below a cent. `amount_minor` stays, derived: its whole cents, rounded down,
-- and the trigger refuses a row where the two disagree. Every approval before this migration held
-- a whole number of cents, so its base units are its cents times 10,000.
ALTER TABLE `approvals` ADD `amount_base_units` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE `approvals` SET `amount_base_units` = `amount_minor` * 10000;--> statement-breakpoint
CREATE TRIGGER `approvals_amount_cents_derived` BEFORE INSERT ON `approvals`
WHEN NEW.`amount_minor` IS NOT NEW.`amount_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'amount_cents_not_derived'); END;
