-- Events and webhook deliveries are kept EVENT_RETENTION_DAYS (src/services/housekeeping.ts): the
-- housekeeping pass removes the oldest first, a bounded batch at a time, through these indexes.
create index events_created on events (created_at);
create index webhook_deliveries_created on webhook_deliveries (created_at);
