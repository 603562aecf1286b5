DROP INDEX `approvals_one_pending_per_charge`;--> statement-breakpoint
CREATE UNIQUE INDEX `approvals_one_pending_per_charge_agent` ON `approvals` (`charge_id`,`agent_id`) WHERE status = 'pending';