ALTER TABLE `x402_payments` ADD `seen_block` integer;--> statement-breakpoint
ALTER TABLE `outbound_transfers` ADD `sent_block` integer;--> statement-breakpoint
ALTER TABLE `audit_checkpoints` ADD `sent_block` integer;