-- A delivery made by an event's insert is dated with its event: an event's time comes from the
-- service's clock during its transaction, later than the transaction's `now()`, so a delivery dated
-- `now()` read as made before the event it delivers. Never before the transaction either.
create or replace function enqueue_webhook_deliveries() returns trigger language plpgsql as $$
begin
  with created as (
    insert into webhook_deliveries (event_id, endpoint_id, created_at)
    select i.id, r.id, greatest(now(), i.created_at)
    from inserted i cross join lateral webhook_endpoints_receiving(i.organization_id, i.livemode, i.type) r
    order by i.id, r.id
    returning id
  )
  insert into timers (kind, due_at, payload)
  select 'webhook.deliver', now(), jsonb_build_object('deliveryId', id) from created;
  return null;
end
$$;
