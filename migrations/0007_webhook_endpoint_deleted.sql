ALTER TABLE `webhook_endpoints` ADD `deleted_at` text;--> statement-breakpoint
-- Endpoints disabled before this column existed: the service's disabling wrote an endpoint.disabled
-- event naming the endpoint at that instant; any other disabled one was removed with DELETE.
UPDATE `webhook_endpoints` SET `deleted_at` = `disabled_at` WHERE `disabled_at` IS NOT NULL AND NOT EXISTS (
  SELECT 1 FROM `outbox_events` e WHERE e.`type` = 'endpoint.disabled' AND e.`created_at` = `webhook_endpoints`.`disabled_at`
    AND json_extract(e.`data`, '$.endpointId') = `webhook_endpoints`.`id`
);
