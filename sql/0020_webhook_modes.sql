-- Webhook endpoints get the mode of the key that created them. Existing endpoints become live, so they
-- keep receiving what they received: a live endpoint receives every event of the organization (both
-- modes: receivers filter on livemode), a test endpoint only the events with livemode false. A disabled
-- endpoint receives nothing. After a secret rotation the previous secret keeps signing beside the new
-- one until `previous_secret_expires_at`.
alter table webhook_endpoints
  add column livemode boolean not null default true,
  add column enabled boolean not null default true,
  add column previous_secret text,
  add column previous_secret_expires_at timestamptz;
alter table webhook_endpoints alter column livemode drop default;
drop index webhook_endpoints_org_created;
create index webhook_endpoints_org_mode_created on webhook_endpoints (organization_id, livemode, created_at desc, id desc);

-- Which enabled endpoints receive an event: the one rule, for the trigger below and for redeliveries.
create function webhook_endpoints_receiving(org text, event_livemode boolean, event_type text)
returns table (id text) language sql stable as $$
  select e.id from webhook_endpoints e
  where e.organization_id = org and e.enabled and (e.livemode or not event_livemode)
    and (e.events is null or event_type = any (e.events))
$$;

create or replace function enqueue_webhook_deliveries() returns trigger language plpgsql as $$
begin
  with created as (
    insert into webhook_deliveries (event_id, endpoint_id)
    select i.id, r.id
    from inserted i cross join lateral webhook_endpoints_receiving(i.organization_id, i.livemode, i.type) r
    order by i.id, r.id
    returning id
  )
  insert into timers (kind, due_at, payload)
  select 'webhook.deliver', now(), jsonb_build_object('deliveryId', id) from created;
  return null;
end
$$;

-- The delivery log of an endpoint (newest first), the last attempt's duration, and when the attempt in
-- flight (if any) started.
alter table webhook_deliveries
  add column last_duration_ms integer,
  add column attempt_started_at timestamptz;
create index webhook_deliveries_endpoint_created on webhook_deliveries (endpoint_id, created_at desc, id desc);

-- The agent an event's object belongs to (calls, their transcripts and analyses, campaigns), written
-- with the event, so a key restricted to some agents lists only theirs through an index; null for
-- the organization's own objects (contacts, knowledge).
alter table events add column agent_id text;
update events set agent_id = data ->> 'agentId'
where type in ('call.started', 'call.ended', 'call.analysis_ready', 'campaign.started', 'campaign.completed',
  'campaign.cancelled');
update events e set agent_id = c.agent_id from calls c
where e.type = 'call.transcript_ready' and c.id = e.data ->> 'callId';
create index events_org_mode_agent_created on events (organization_id, livemode, agent_id, created_at desc, id desc);
