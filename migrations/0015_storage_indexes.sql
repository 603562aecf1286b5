DROP INDEX `audit_events_reference`;--> statement-breakpoint
CREATE INDEX `audit_events_payout` ON `audit_events` (`reference`) WHERE "audit_events"."type" = 'payout.paid';--> statement-breakpoint
CREATE INDEX `audit_events_refund` ON `audit_events` (`reference`) WHERE "audit_events"."type" = 'charge.refunded';--> statement-breakpoint
DROP INDEX `ledger_entries_account`;--> statement-breakpoint
DROP INDEX `charges_checkout_link`;--> statement-breakpoint
CREATE INDEX `charges_checkout_link` ON `charges` (`checkout_link_id`) WHERE "charges"."checkout_link_id" IS NOT NULL;--> statement-breakpoint
DROP INDEX `webhook_deliveries_due`;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_finished` ON `webhook_deliveries` (`created_at`) WHERE "webhook_deliveries"."status" <> 'pending';--> statement-breakpoint
CREATE INDEX `webhook_deliveries_due` ON `webhook_deliveries` (`next_attempt_at`) WHERE "webhook_deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX `console_revoked_sessions_expires` ON `console_revoked_sessions` (`expires_at`);--> statement-breakpoint
CREATE INDEX `idempotency_keys_expires` ON `idempotency_keys` (`expires_at`);--> statement-breakpoint
CREATE INDEX `rate_limits_window` ON `rate_limits` (`window_start`);