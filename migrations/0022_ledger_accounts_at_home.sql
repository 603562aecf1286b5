-- An entry of an agent's or merchant's account is only ever written in that owner's home shard, where
-- its balance row lives: in a database without the row (another shard), or in control (shard 0) for an
-- owner the directory places elsewhere, the entry would move money no balance shows. Refused loudly.
CREATE TRIGGER IF NOT EXISTS `ledger_entries_agent_at_home` BEFORE INSERT ON `ledger_entries`
WHEN NEW.`account` LIKE 'agent:%' AND (
  NOT EXISTS (SELECT 1 FROM `agents` WHERE `id` = substr(NEW.`account`, 7))
  OR EXISTS (SELECT 1 FROM `shard_directory` WHERE `owner_kind` = 'agent' AND `owner_id` = substr(NEW.`account`, 7) AND `shard` <> 0)
)
BEGIN
  SELECT RAISE(ABORT, 'ledger_account_not_at_home');
END;
--> statement-breakpoint
CREATE TRIGGER IF NOT EXISTS `ledger_entries_merchant_at_home` BEFORE INSERT ON `ledger_entries`
WHEN NEW.`account` LIKE 'merchant:%' AND (
  NOT EXISTS (SELECT 1 FROM `merchants` WHERE `id` = substr(NEW.`account`, 10))
  OR EXISTS (SELECT 1 FROM `shard_directory` WHERE `owner_kind` = 'merchant' AND `owner_id` = substr(NEW.`account`, 10) AND `shard` <> 0)
)
BEGIN
  SELECT RAISE(ABORT, 'ledger_account_not_at_home');
END;
