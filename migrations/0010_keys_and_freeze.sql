ALTER TABLE `merchants` ADD `previous_api_key_hash` text;--> statement-breakpoint
ALTER TABLE `merchants` ADD `previous_key_expires_at` text;--> statement-breakpoint
CREATE UNIQUE INDEX `merchants_previous_api_key_hash_unique` ON `merchants` (`previous_api_key_hash`);--> statement-breakpoint
ALTER TABLE `agents` ADD `previous_api_key_hash` text;--> statement-breakpoint
ALTER TABLE `agents` ADD `previous_key_expires_at` text;--> statement-breakpoint
ALTER TABLE `agents` ADD `frozen_at` text;--> statement-breakpoint
ALTER TABLE `agents` ADD `frozen_reason` text;--> statement-breakpoint
CREATE UNIQUE INDEX `agents_previous_api_key_hash_unique` ON `agents` (`previous_api_key_hash`);