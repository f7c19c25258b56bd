-- Deliveries of events to webhook endpoints (signed, retried, given up): one row per event and subscribed
-- endpoint. A trigger creates them with the event, in the event's own transaction whoever writes it,
-- together with the timer of the first attempt; each attempt's timer is written by the one before.
create table webhook_deliveries (
  id bigint generated always as identity primary key,
  event_id text not null references events (id),
  -- No foreign key: an endpoint can be deleted; its pending deliveries are then dropped.
  endpoint_id text not null,
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed', 'dropped')),
  attempts integer not null default 0,
  last_status integer,
  last_error text,
  created_at timestamptz not null default now(),
  finished_at timestamptz
);
create index webhook_deliveries_event on webhook_deliveries (event_id);

create function enqueue_webhook_deliveries() returns trigger language plpgsql as $$
begin
  with created as (
    insert into webhook_deliveries (event_id, endpoint_id)
    select i.id, e.id
    from inserted i
      join webhook_endpoints e
        on e.organization_id = i.organization_id and (e.events is null or i.type = any (e.events))
    order by i.id, e.id
    returning id
  )
  insert into timers (kind, due_at, payload)
  select 'webhook.deliver', now(), jsonb_build_object('deliveryId', id) from created;
  return null;
end
$$;

create trigger events_webhook_deliveries after insert on events
  referencing new table as inserted
  for each statement execute function enqueue_webhook_deliveries();
