-- Refunds exact to the token's base unit, as charges are: a refund and a charge's refunded sum gain
-- their amount in base units, which is what moves from now on; the cents columns stay, derived
-- (whole cents, rounded down), and the triggers below refuse any write that lets the two disagree.
-- Every refund before this migration is a whole number of cents.
ALTER TABLE `charges` ADD `refunded_base_units` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- A charge made by a settlement through the service as a merchant's facilitator is paid by that one
-- payment only. Before this migration such a charge is known by its resource (a version 2 payment
-- that named none cannot be told apart).
ALTER TABLE `charges` ADD `facilitated` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `refunds` ADD `amount_base_units` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE `charges` SET `refunded_base_units` = `refunded_minor` * 10000;--> statement-breakpoint
UPDATE `charges` SET `facilitated` = 1 WHERE `resource` IS NOT NULL;--> statement-breakpoint
UPDATE `refunds` SET `amount_base_units` = `amount_minor` * 10000;--> statement-breakpoint
CREATE TRIGGER `charges_refunded_base_units_within_amount` BEFORE UPDATE OF `refunded_base_units` ON `charges`
WHEN NEW.`refunded_base_units` < 0 OR NEW.`refunded_base_units` > NEW.`amount_base_units`
BEGIN SELECT RAISE(ABORT, 'batch_guard:refund_exceeds_remaining'); END;--> statement-breakpoint
CREATE TRIGGER `charges_refunded_cents_derived` BEFORE UPDATE OF `refunded_minor`, `refunded_base_units` ON `charges`
WHEN NEW.`refunded_minor` IS NOT NEW.`refunded_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'refunded_cents_not_derived'); END;--> statement-breakpoint
CREATE TRIGGER `refunds_amount_cents_derived` BEFORE INSERT ON `refunds`
WHEN NEW.`amount_minor` IS NOT NEW.`amount_base_units` / 10000
BEGIN SELECT RAISE(ABORT, 'amount_cents_not_derived'); END;
