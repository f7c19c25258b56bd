-- Deliveries that found their organization's queue full wait in the timers table with a distant due
-- time and `waitingFor` (the organization) in their payload; when the queue has room again, the
-- sender brings the oldest of them forward through this index (src/services/webhookDelivery.ts).
create index timers_webhook_waiting on timers ((payload ->> 'waitingFor'), due_at)
  where kind = 'webhook.deliver' and status = 'pending' and payload ? 'waitingFor';
