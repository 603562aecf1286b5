-- A treasury check keeps the ledger's figures exact to the base unit beside the cents it states
-- (rounded down). Every check before this migration counted whole cents only, so its exact
-- figures are its cents times 10,000.
ALTER TABLE `treasury_checks` ADD `on_chain_in_base_units` text DEFAULT '0' NOT NULL;--> statement-breakpoint
ALTER TABLE `treasury_checks` ADD `on_chain_out_base_units` text DEFAULT '0' NOT NULL;--> statement-breakpoint
ALTER TABLE `treasury_checks` ADD `pending_out_base_units` text DEFAULT '0' NOT NULL;--> statement-breakpoint
UPDATE `treasury_checks` SET `on_chain_in_base_units` = CAST(`on_chain_in_minor` * 10000 AS TEXT),
  `on_chain_out_base_units` = CAST(`on_chain_out_minor` * 10000 AS TEXT),
  `pending_out_base_units` = CAST(`pending_out_minor` * 10000 AS TEXT);
