-- Campaigns: a list of contacts called by an agent, at most `concurrency` calls at a time.
-- The progress counters are kept on the campaign row, recomputed from its contacts in the same
-- transaction as every change of a contact, so the checks below hold at every commit.
create table campaigns (
  id text primary key,
  organization_id text not null references organizations (id),
  livemode boolean not null,
  name text not null,
  agent_id text not null references agents (id),
  status text not null check (status in ('running', 'completed', 'cancelled')),
  concurrency integer not null check (concurrency between 1 and 20),
  max_attempts integer not null check (max_attempts between 1 and 5),
  total integer not null check (total >= 1),
  pending integer not null,
  in_progress integer not null,
  completed integer not null default 0,
  succeeded integer not null default 0,
  failed integer not null default 0,
  cancelled integer not null default 0,
  created_at timestamptz not null,
  started_at timestamptz,
  completed_at timestamptz,
  check (completed = succeeded + failed),
  check (in_progress between 0 and concurrency),
  check (total = pending + in_progress + completed + cancelled)
);
create index campaigns_org_mode_created on campaigns (organization_id, livemode, created_at desc, id desc);
create index campaigns_org_mode_status_created
  on campaigns (organization_id, livemode, status, created_at desc, id desc);

-- One row per contact of a campaign, in the order given. `attempts` counts the calls placed for it.
create table campaign_contacts (
  campaign_id text not null references campaigns (id),
  position integer not null,
  phone text not null,
  name text,
  contact_id text,
  variables jsonb not null default '{}',
  status text not null default 'pending'
    check (status in ('pending', 'in_progress', 'succeeded', 'failed', 'cancelled')),
  attempts integer not null default 0,
  call_id text,
  primary key (campaign_id, position)
);
create index campaign_contacts_in_progress on campaign_contacts (campaign_id) where status = 'in_progress';
create index campaign_contacts_pending on campaign_contacts (campaign_id, position) where status = 'pending';
