-- Limits of live phone calls per organization: calls in progress at once, and calls placed in any 60
-- minutes. `placed_at` is when a live phone call entered the carrier path (created, or its task
-- fired, or its campaign started it): the hourly limit counts by it.
alter table calls add column placed_at timestamptz;

-- Calls in progress of an organization: at most its maxConcurrentCalls entries, so counting is cheap.
create index calls_live_phone_in_progress on calls (organization_id)
  where livemode and direction = 'outbound' and status in ('initiated', 'ringing', 'ongoing');
-- Placements by time, for the rolling hour.
create index calls_live_phone_placed on calls (organization_id, placed_at)
  where livemode and direction = 'outbound' and placed_at is not null;

-- One row per organization, locked by every placement of a live phone call, so that the checks of
-- the limits and the placement are one critical section across requests and processes. It also
-- keeps the rolling hour's count: `hour_count` placements have `placed_at` > `hour_cut`; each
-- placement moves the cut to an hour ago and subtracts the placements it passed, so a check counts
-- only the calls that left the hour since the last one, never the whole hour.
create table call_limits (
  organization_id text primary key references organizations (id),
  hour_cut timestamptz not null,
  hour_count integer not null check (hour_count >= 0)
);
