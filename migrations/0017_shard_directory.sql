CREATE TABLE `shard_directory` (
	`owner_kind` text NOT NULL,
	`owner_id` text NOT NULL,
	`shard` integer NOT NULL,
	`assigned_at` text NOT NULL,
	PRIMARY KEY(`owner_kind`, `owner_id`),
	CONSTRAINT "shard_directory_owner_kind" CHECK("shard_directory"."owner_kind" IN ('merchant', 'agent')),
	CONSTRAINT "shard_directory_shard_non_negative" CHECK("shard_directory"."shard" >= 0)
);
--> statement-breakpoint
CREATE INDEX `shard_directory_shard` ON `shard_directory` (`shard`);--> statement-breakpoint
-- An owner's shard is decided once: the directory refuses to change or forget it.
CREATE TRIGGER `shard_directory_no_update` BEFORE UPDATE ON `shard_directory`
BEGIN
  SELECT RAISE(ABORT, 'shard_assignment_immutable');
END;
--> statement-breakpoint
CREATE TRIGGER `shard_directory_no_delete` BEFORE DELETE ON `shard_directory`
BEGIN
  SELECT RAISE(ABORT, 'shard_assignment_immutable');
END;
--> statement-breakpoint
-- Every owner created before shards lives in shard 0, the database that already holds it.
INSERT INTO `shard_directory` (`owner_kind`, `owner_id`, `shard`, `assigned_at`) SELECT 'merchant', `id`, 0, `created_at` FROM `merchants`;
--> statement-breakpoint
INSERT INTO `shard_directory` (`owner_kind`, `owner_id`, `shard`, `assigned_at`) SELECT 'agent', `id`, 0, `created_at` FROM `agents`;
