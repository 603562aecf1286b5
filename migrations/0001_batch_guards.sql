-- A statement in a money batch asserts a condition by inserting its reason
-- here when the condition does not hold; the trigger aborts the whole batch
-- (D1 rolls it back) with the reason in the message, so a guarded movement is
-- all or nothing and the caller learns which condition failed.
CREATE TABLE `batch_guards` (`reason` text NOT NULL);
--> statement-breakpoint
CREATE TRIGGER `batch_guards_abort` BEFORE INSERT ON `batch_guards`
BEGIN
  SELECT RAISE(ABORT, 'batch_guard:' || NEW.reason);
END;
